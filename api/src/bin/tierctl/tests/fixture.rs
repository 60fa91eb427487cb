//! A recording HTTP/1.1 server for the command tests: each connection
//! carries one request, answered by a handler and closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use clap::Parser;

use crate::cli::Cli;
use crate::commands::{Output, run};
use crate::endpoint::Endpoint;
use crate::error::TierctlError;

/// One request as the server received it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key` in the query string.
    pub fn query(&self, key: &str) -> Option<u64> {
        let (_, query) = self.path.split_once('?')?;
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok())
    }
}

/// Status and body.
pub type Reply = (u16, Vec<u8>);

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A JSON reply.
pub fn json(status: u16, value: &impl serde::Serialize) -> Reply {
    (status, serde_json::to_vec(value).unwrap())
}

/// An `ErrorBody` reply.
pub fn error(status: u16, message: &str, detail: serde_json::Value) -> Reply {
    json(
        status,
        &serde_json::json!({ "error": message, "detail": detail }),
    )
}

/// The server; stops when dropped.
pub struct Server {
    pub socket: PathBuf,
    pub tcp: Option<SocketAddr>,
    requests: Arc<Mutex<Vec<Request>>>,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tierctl-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Server {
    /// A server on a unix socket in a fresh directory.
    pub fn unix(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let dir = scratch_dir();
        let socket = dir.join("api.sock");
        let listener = Listener::Unix(UnixListener::bind(&socket).unwrap());
        Server::start(dir, socket, None, listener, Arc::new(handler))
    }

    /// A server on TCP loopback.
    pub fn tcp(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let dir = scratch_dir();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        Server::start(
            dir.clone(),
            dir.join("none.sock"),
            Some(addr),
            Listener::Tcp(listener),
            Arc::new(handler),
        )
    }

    fn start(
        dir: PathBuf,
        socket: PathBuf,
        tcp: Option<SocketAddr>,
        listener: Listener,
        handler: Arc<Handler>,
    ) -> Server {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let thread = std::thread::spawn(move || {
            loop {
                let stop = match &listener {
                    Listener::Unix(l) => serve(l.accept().unwrap().0, &*handler, &log),
                    Listener::Tcp(l) => serve(l.accept().unwrap().0, &*handler, &log),
                };
                if stop {
                    return;
                }
            }
        });
        Server {
            socket,
            tcp,
            requests,
            thread: Some(thread),
            dir,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// A file in the server's scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs `tierctl ARGS` against this server's unix socket (unless ARGS
    /// name another target): stdout, or the error.
    pub fn tierctl(&self, args: &[&str]) -> Result<String, TierctlError> {
        let (out, result) = self.tierctl_output(args);
        result.map(|()| out)
    }

    /// Runs `tierctl ARGS` as [`Server::tierctl`] does: stdout and the
    /// outcome.
    pub fn tierctl_output(&self, args: &[&str]) -> (String, Result<(), TierctlError>) {
        let mut argv = vec!["tierctl".to_owned()];
        if !args.iter().any(|a| a.starts_with("--api-")) {
            argv.push("--api-socket".into());
            argv.push(self.socket.display().to_string());
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        run_tierctl(&argv)
    }
}

/// Runs tierctl with `argv` (no `$TIERVISOR_API_SOCKET`): stdout, or the
/// error.
pub fn tierctl(argv: &[String]) -> Result<String, TierctlError> {
    let (out, result) = run_tierctl(argv);
    result.map(|()| out)
}

/// Runs tierctl with `argv`, stdout not a terminal: stdout and the
/// outcome.
fn run_tierctl(argv: &[String]) -> (String, Result<(), TierctlError>) {
    let cli = Cli::try_parse_from(argv).unwrap();
    let mut out = Vec::new();
    let result = Endpoint::new(&cli.target, None).and_then(|endpoint| {
        let mut output = Output {
            out: &mut out,
            json: cli.json,
            terminal: false,
        };
        run(&cli, &endpoint, &mut output)
    });
    (String::from_utf8(out).unwrap(), result)
}

impl Drop for Server {
    fn drop(&mut self) {
        let stop = b"STOP / HTTP/1.1\r\n\r\n";
        match self.tcp {
            Some(addr) => {
                let _ = std::net::TcpStream::connect(addr).and_then(|mut s| s.write_all(stop));
            }
            None => {
                let _ = std::os::unix::net::UnixStream::connect(&self.socket)
                    .and_then(|mut s| s.write_all(stop));
            }
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads one request from `stream`, records it in `log` and answers it;
/// true for the drop's stop request.
fn serve<S: Read + Write>(stream: S, handler: &Handler, log: &Mutex<Vec<Request>>) -> bool {
    match read_request(stream) {
        Some((_, request)) if request.method == "STOP" => true,
        Some((mut stream, request)) => {
            let (status, body) = handler(&request);
            // Recorded before the answer: a test reads the log as soon as
            // its request returns.
            log.lock().unwrap().push(request);
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(&body));
            false
        }
        None => false,
    }
}

fn read_request<S: Read + Write>(stream: S) -> Option<(S, Request)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let mut request = Request {
        method: parts.next()?.to_owned(),
        path: parts.next()?.to_owned(),
        ..Request::default()
    };
    if request.method == "STOP" {
        return Some((reader.into_inner(), request));
    }
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        request
            .headers
            .push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    request.body = vec![0; length];
    reader.read_exact(&mut request.body).ok()?;
    Some((reader.into_inner(), request))
}
