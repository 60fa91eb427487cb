//! Sockets and connections: the unix socket's mode, stale and live
//! sockets, TCP with the bearer token, keep-alive, concurrent and stalled
//! clients, the connection cap, timeouts, stop.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use api::types::VmmPingResponse;
use api::{ApiClient, ApiServer, ServerConfig, ServerError};
use common::{Fixture, MemoryVmm, RawConn, TempDir, expect_status};

const PING: &[u8] = b"GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn socket_is_mode_0600_and_removed_on_stop() {
    let f = Fixture::new();
    let meta = std::fs::symlink_metadata(&f.socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(f.server.unix_socket(), Some(f.socket.as_path()));
    // No staging directory is left beside it.
    let entries: Vec<_> = std::fs::read_dir(f.dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1);
    let socket = f.socket.clone();
    f.server.stop();
    assert!(!socket.exists());
    assert!(UnixStream::connect(&socket).is_err());
}

#[test]
fn stale_socket_is_replaced_live_one_refused() {
    let dir = TempDir::new();
    let path = dir.path().join("api.sock");
    // A socket nobody listens on: a VMM that died.
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let server =
        ApiServer::start(ServerConfig::unix(&path), Arc::new(MemoryVmm::default())).unwrap();
    let ping: VmmPingResponse = ApiClient::unix(&path).get_json("/api/v1/vmm.ping").unwrap();
    assert_eq!(ping.pid, std::process::id());

    // A second VMM on the same path is refused, and the first goes on.
    let second = ApiServer::start(ServerConfig::unix(&path), Arc::new(MemoryVmm::default()));
    match second {
        Err(e @ ServerError::SocketInUse(_)) => {
            assert!(e.to_string().contains("another VMM answers on it"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    ApiClient::unix(&path)
        .get_json::<VmmPingResponse>("/api/v1/vmm.ping")
        .unwrap();
    drop(server);

    let file = dir.path().join("file");
    std::fs::write(&file, "keep me").unwrap();
    let refused = ApiServer::start(ServerConfig::unix(&file), Arc::new(MemoryVmm::default()));
    assert!(matches!(refused, Err(ServerError::NotASocket(_))));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

fn tcp_server(token: &str) -> ApiServer {
    let config = ServerConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        token: Some(token.into()),
        ..ServerConfig::default()
    };
    ApiServer::start(config, Arc::new(MemoryVmm::default())).unwrap()
}

#[test]
fn tcp_needs_a_token_at_start() {
    let config = ServerConfig {
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    };
    let e = ApiServer::start(config, Arc::new(MemoryVmm::default())).unwrap_err();
    assert!(matches!(e, ServerError::TcpWithoutToken));
    assert_eq!(
        e.to_string(),
        "the TCP API needs a bearer token (--api-token-file)"
    );
}

#[test]
fn token_file_is_read_and_trimmed() {
    let dir = TempDir::new();
    let file = dir.path().join("token");
    std::fs::write(&file, "  s3cret-token\n").unwrap();
    assert_eq!(
        ServerConfig::read_token_file(&file).unwrap(),
        "s3cret-token"
    );
    std::fs::write(&file, "\n").unwrap();
    assert!(matches!(
        ServerConfig::read_token_file(&file),
        Err(ServerError::BadToken)
    ));
    assert!(matches!(
        ServerConfig::read_token_file(&dir.path().join("none")),
        Err(ServerError::TokenFile { .. })
    ));
}

#[test]
fn tcp_without_or_with_a_wrong_token_is_401() {
    let server = tcp_server("s3cret");
    let addr = server.tcp_addr().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let path = "/api/v1/vmm.ping";
    for token in [None, Some("wrong"), Some("s3cre"), Some("s3cret2")] {
        let reply = ApiClient::tcp(addr, token.map(Into::into))
            .request("GET", path, None)
            .unwrap();
        assert_eq!(reply.status, 401, "{token:?}");
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer realm=\"tiervisor\"")
        );
        assert!(common::documented_statuses("GET", path).contains(&401));
    }
    // Not even the route table is shown without the token.
    let reply = ApiClient::tcp(addr, None)
        .request("GET", "/nope", None)
        .unwrap();
    assert_eq!(reply.status, 401);
    let mut raw = RawConn::tcp(TcpStream::connect(addr).unwrap());
    raw.send(b"GET /api/v1/vmm.ping HTTP/1.1\r\nAuthorization: Basic czNjcmV0\r\n\r\n");
    assert_eq!(raw.read_reply().status, 401);

    let ok = ApiClient::tcp(addr, Some("s3cret".into()));
    let ping: VmmPingResponse = ok.get_json(path).unwrap();
    assert_eq!(ping.pid, std::process::id());
    let metrics = ok.get_text("/metrics").unwrap();
    assert!(metrics.contains("tiervisor_build_info"));
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let f = Fixture::new();
    let mut conn = f.raw();
    for _ in 0..3 {
        let reply = conn.send(PING).read_reply();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("connection"), None);
    }
    // Pipelined: two requests in one write, two answers in order.
    conn.send(&[PING, b"GET /api/v1/vm.info HTTP/1.1\r\n\r\n"].concat());
    assert_eq!(conn.read_reply().status, 200);
    assert_eq!(conn.read_reply().status, 404);
    // An error with its body read keeps the connection.
    assert_eq!(conn.request("PUT", "/api/v1/vm.create", b"{").status, 400);
    assert_eq!(conn.send(PING).read_reply().status, 200);
    // Connection: close is honoured.
    let reply = conn
        .send(b"GET /api/v1/vmm.ping HTTP/1.1\r\nConnection: close\r\n\r\n")
        .read_reply();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), Some("close"));
    assert!(conn.is_closed());

    // HTTP/1.0 closes unless asked to keep alive.
    let mut conn = f.raw();
    conn.send(b"GET /api/v1/vmm.ping HTTP/1.0\r\n\r\n");
    assert_eq!(conn.read_reply().status, 200);
    assert!(conn.is_closed());
    let mut conn = f.raw();
    conn.send(b"GET /api/v1/vmm.ping HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let reply = conn.read_reply();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), Some("keep-alive"));
    assert_eq!(conn.send(PING).read_reply().status, 200);
}

#[test]
fn expect_100_continue_is_answered() {
    let f = Fixture::new();
    let mut conn = f.raw();
    conn.send(
        b"PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(conn.read_reply().status, 100);
    conn.send(b"{}");
    let reply = conn.read_reply();
    let e = expect_status(&reply, 400, "PUT", "/api/v1/vm.create");
    assert_eq!(e["detail"]["field"], "memory");
}

#[test]
fn two_clients_at_once() {
    let f = Fixture::new();
    f.create_vm();
    // One client's boot is held inside the VMM; the other is served
    // meanwhile (a server that handled one request at a time would never
    // answer the pings while the boot waits).
    f.vmm.boot_gate.close();
    let slow_client = f.client();
    let slow = thread::spawn(move || slow_client.put("/api/v1/vm.boot").unwrap().status);
    assert!(
        f.vmm.boot_gate.wait_for_boot(Duration::from_secs(60)),
        "the boot reached the VMM"
    );
    for _ in 0..5 {
        f.client()
            .get_json::<VmmPingResponse>("/api/v1/vmm.ping")
            .unwrap();
    }
    assert!(!slow.is_finished(), "the boot is still held");
    f.vmm.boot_gate.release();
    assert_eq!(slow.join().unwrap(), 204);

    let clients: Vec<_> = (0..8)
        .map(|_| {
            let c = f.client();
            thread::spawn(move || {
                for _ in 0..10 {
                    c.get_json::<serde_json::Value>("/api/v1/vm.info").unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn a_stalled_client_does_not_stop_others_and_times_out() {
    let f = Fixture::new(); // request timeout 500 ms
    let mut stalled = f.raw();
    stalled.send(b"PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"id\":");
    let mut half_head = f.raw();
    half_head.send(b"GET /api/v1/vmm.p");
    for _ in 0..3 {
        f.client()
            .get_json::<VmmPingResponse>("/api/v1/vmm.ping")
            .unwrap();
    }
    let start = Instant::now();
    let reply = stalled.read_reply();
    assert_eq!(reply.status, 408);
    // The request timeout ended it (the body names it), not a hang.
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("not received within 500 ms")
    );
    assert!(stalled.is_closed());
    assert_eq!(half_head.read_reply().status, 408);

    // A slow drip does not extend the deadline.
    let mut drip = f.raw();
    let start = Instant::now();
    for b in b"GET /api/v1/vmm.ping HTTP/1.1\r\nX-Slow: " {
        if drip.try_send(&[*b]).is_err() {
            break;
        }
        thread::sleep(Duration::from_millis(40));
        if start.elapsed() > Duration::from_millis(900) {
            break;
        }
    }
    assert_eq!(drip.read_reply().status, 408);
}

#[test]
fn idle_connections_are_closed() {
    let f = Fixture::with(|c| c.idle_timeout = Duration::from_millis(200));
    let mut conn = f.raw();
    assert_eq!(conn.send(PING).read_reply().status, 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    while f.server.open_connections() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(f.server.open_connections(), 0);
    assert!(conn.is_closed());
}

#[test]
fn connections_over_the_cap_get_503() {
    let f = Fixture::with(|c| c.max_connections = 2);
    let mut held: Vec<RawConn> = (0..2).map(|_| f.raw()).collect();
    for conn in &mut held {
        assert_eq!(conn.send(PING).read_reply().status, 200);
    }
    let mut third = f.raw();
    let reply = third.read_reply();
    expect_status(&reply, 503, "GET", "/api/v1/vmm.ping");
    assert_eq!(reply.header("retry-after"), Some("1"));
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(60);
    while f.server.open_connections() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(f.raw().send(PING).read_reply().status, 200);
}

#[test]
fn stop_closes_open_connections() {
    let f = Fixture::new();
    let mut conn = f.raw();
    assert_eq!(conn.send(PING).read_reply().status, 200);
    let start = Instant::now();
    f.server.stop();
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "stop did not hang"
    );
    assert!(conn.is_closed());
}

#[test]
fn a_client_that_never_reads_is_dropped_after_the_write_timeout() {
    let f = Fixture::with(|c| c.write_timeout = Duration::from_millis(200));
    f.create_vm();
    // Pipeline requests and never read the answers: the server's writes
    // block once the socket buffers are full, and it stops reading.
    let mut greedy = UnixStream::connect(&f.socket).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let request = b"GET /metrics HTTP/1.1\r\n\r\n";
    let mut blocked = false;
    for _ in 0..100_000 {
        if greedy.write_all(request).is_err() {
            blocked = true;
            break;
        }
    }
    assert!(
        blocked,
        "the server kept reading without its answers being read"
    );
    f.client()
        .get_json::<VmmPingResponse>("/api/v1/vmm.ping")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while f.server.open_connections() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(f.server.open_connections(), 0);
}
