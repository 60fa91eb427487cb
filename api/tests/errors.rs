//! Every error status the server sends, each with a message that says
//! what is wrong (for bad input: which field and why), and each listed in
//! the OpenAPI document for the route that sent it.

mod common;

use std::sync::atomic::Ordering;

use serde_json::json;

use common::{Fixture, MIB, expect_status, vm_config};

const CREATE: &str = "/api/v1/vm.create";

fn create_with(f: &Fixture, body: &[u8]) -> serde_json::Value {
    let reply = f.raw().request("PUT", CREATE, body);
    expect_status(&reply, 400, "PUT", CREATE)
}

#[test]
fn bad_json_bodies_name_the_field_and_why() {
    let f = Fixture::new();
    let with = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut config = vm_config();
        change(&mut config);
        create_with(&f, config.to_string().as_bytes())
    };

    let e = with(&|c| c["memory"]["tiers"][0]["size"] = json!("32M"));
    assert_eq!(e["detail"]["field"], "memory.tiers[0].size");
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("invalid type: string \"32M\", expected u64"),
        "{e}"
    );
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .starts_with("memory.tiers[0].size: ")
    );

    // 2^64 does not fit a u64.
    let e = create_with(
        &f,
        vm_config()
            .to_string()
            .replace(&(64 * MIB).to_string(), "18446744073709551616")
            .as_bytes(),
    );
    assert_eq!(e["detail"]["field"], "memory.size");
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("0..=18446744073709551615")
    );

    let e = with(&|c| c["vcpus"] = json!(-1));
    assert_eq!(e["detail"]["field"], "vcpus");
    assert!(
        e["detail"]["reason"].as_str().unwrap().contains("-1"),
        "{e}"
    );

    let e = with(&|c| c["memory"]["bogus"] = json!(1));
    assert_eq!(e["detail"]["field"], "memory.bogus");
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("unknown field `bogus`")
    );

    let e = with(&|c| {
        c["memory"].as_object_mut().unwrap().remove("size");
    });
    assert_eq!(e["detail"]["field"], "memory.size");
    assert_eq!(e["detail"]["reason"], "missing field `size`");

    let e = with(&|c| c["payload"]["kind"] = json!("iso"));
    assert_eq!(e["detail"]["field"], "payload.kind");

    let e = with(&|c| c["tiering"]["fast_quota"]["max_bytes"] = json!(1.5));
    assert_eq!(e["detail"]["field"], "tiering.fast_quota.max_bytes");
}

#[test]
fn malformed_empty_and_non_utf8_bodies() {
    let f = Fixture::new();
    let e = create_with(&f, b"{\"id\": ");
    assert_eq!(e["detail"]["field"], serde_json::Value::Null);
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("malformed JSON"),
        "{e}"
    );
    assert_eq!(e["detail"]["line"], 1);

    let e = create_with(&f, format!("{} trailing", vm_config()).as_bytes());
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("trailing characters")
    );

    let e = create_with(&f, b"");
    assert_eq!(e["error"], "a JSON request body is required");

    let e = create_with(&f, b"{\"id\": \"\xff\xfe\"}");
    assert_eq!(e["detail"]["offset"], 8);
    assert!(e["error"].as_str().unwrap().contains("not UTF-8"));

    let e = create_with(&f, b"[1, 2]");
    assert!(
        e["detail"]["reason"]
            .as_str()
            .unwrap()
            .contains("invalid type"),
        "{e}"
    );
}

#[test]
fn values_the_vmm_refuses_are_400_with_the_field() {
    let f = Fixture::new();
    let mut config = vm_config();
    config["memory"]["tiers"][1]["size"] = json!(16 * MIB);
    let e = create_with(&f, config.to_string().as_bytes());
    assert_eq!(
        e["detail"],
        json!({ "field": "memory.tiers", "reason": "tiers too small for guest RAM" })
    );
    assert_eq!(e["error"], "memory.tiers: tiers too small for guest RAM");
    // Nothing was created.
    let reply = f.raw().request("GET", "/api/v1/vm.info", b"");
    expect_status(&reply, 404, "GET", "/api/v1/vm.info");
}

#[test]
fn body_or_query_where_none_is_taken_is_400() {
    let f = Fixture::new();
    let reply = f.raw().request("PUT", "/api/v1/vm.boot", b"{}");
    let e = expect_status(&reply, 400, "PUT", "/api/v1/vm.boot");
    assert_eq!(
        e["error"],
        "body: PUT /api/v1/vm.boot takes no request body"
    );
    // The unread body cannot be told from a next request: closed.
    assert_eq!(reply.header("connection"), Some("close"));

    // Closed gracefully: a client that reads the answer before it sends
    // the body sees the end of the stream, and its write still lands
    // instead of breaking the pipe.
    let mut conn = f.raw();
    conn.send(b"PUT /api/v1/vm.boot HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n");
    expect_status(&conn.read_reply(), 400, "PUT", "/api/v1/vm.boot");
    assert!(conn.is_closed());
    conn.try_send(b"{}")
        .expect("the server drains a body it did not read");

    let reply = f.raw().request("GET", "/api/v1/vmm.ping?verbose=1", b"");
    let e = expect_status(&reply, 400, "GET", "/api/v1/vmm.ping");
    assert_eq!(e["detail"]["field"], "query");
}

#[test]
fn bad_frame_queries_are_400() {
    let f = Fixture::new();
    f.create_vm();
    let path = "/api/v1/vm.tiering.frames";
    for (query, field, reason) in [
        ("offset=-1", "offset", "'-1' is not a whole number"),
        ("offset=abc", "offset", "'abc' is not a whole number"),
        (
            "limit=18446744073709551616",
            "limit",
            "is not a whole number",
        ),
        ("limit=100000", "limit", "above the largest page, 65536"),
        ("page=2", "page", "unknown query parameter"),
        ("limit=1&limit=2", "limit", "given twice"),
        ("offset=%G1", "query", "bad percent-escape"),
    ] {
        let reply = f.raw().request("GET", &format!("{path}?{query}"), b"");
        let e = expect_status(&reply, 400, "GET", path);
        assert_eq!(e["detail"]["field"], field, "{query}: {e}");
        assert!(
            e["detail"]["reason"].as_str().unwrap().contains(reason),
            "{query}: {e}"
        );
    }
}

#[test]
fn unknown_routes_are_404_and_wrong_methods_405_with_allow() {
    let f = Fixture::new();
    let reply = f.raw().request("GET", "/api/v1/vm.explode", b"");
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"], "no route /api/v1/vm.explode");
    assert_eq!(f.raw().request("GET", "/api/v1/vm.info/", b"").status, 404);

    let reply = f.raw().request("POST", "/api/v1/vm.tiering", b"");
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("GET, PUT"));
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("POST is not allowed")
    );
    let reply = f.raw().request("GET", "/api/v1/vm.boot", b"");
    assert_eq!(reply.header("allow"), Some("PUT"));

    // HEAD gets the 405 without a body, and the connection goes on.
    let mut conn = f.raw();
    conn.send(b"HEAD /api/v1/vmm.ping HTTP/1.1\r\n\r\n");
    let reply = conn.read_head_only();
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("GET"));
    assert_eq!(conn.request("GET", "/api/v1/vmm.ping", b"").status, 200);
}

#[test]
fn no_vm_is_404_and_wrong_state_409() {
    let f = Fixture::new();
    for path in ["/api/v1/vm.boot", "/api/v1/vm.pause", "/api/v1/vm.delete"] {
        let reply = f.raw().request("PUT", path, b"");
        let e = expect_status(&reply, 404, "PUT", path);
        assert_eq!(e["error"], "no VM has been created");
    }
    for path in ["/api/v1/vm.tiering.stats", "/api/v1/vm.counters"] {
        expect_status(&f.raw().request("GET", path, b""), 404, "GET", path);
    }
    f.create_vm();
    let reply = f.raw().request("PUT", "/api/v1/vm.pause", b"");
    let e = expect_status(&reply, 409, "PUT", "/api/v1/vm.pause");
    assert_eq!(e["error"], "VM is created: cannot pause");
    assert_eq!(
        e["detail"],
        json!({ "state": "created", "action": "pause" })
    );

    let again = vm_config().to_string();
    let reply = f.raw().request("PUT", CREATE, again.as_bytes());
    expect_status(&reply, 409, "PUT", CREATE);

    let reply = f.raw().request(
        "PUT",
        "/api/v1/vm.rebalance",
        br#"{"fast_bytes": 1048576, "deadline_ms": 10}"#,
    );
    let e = expect_status(&reply, 409, "PUT", "/api/v1/vm.rebalance");
    assert_eq!(e["detail"]["action"], "rebalance");
}

#[test]
fn tiering_off_is_409() {
    let f = Fixture::new();
    let mut config = vm_config();
    config.as_object_mut().unwrap().remove("tiering");
    f.client().put_json(CREATE, &config).unwrap();
    for path in [
        "/api/v1/vm.tiering",
        "/api/v1/vm.tiering.stats",
        "/api/v1/vm.tiering.frames",
        "/api/v1/vm.rebalance",
    ] {
        let reply = f.raw().request("GET", path, b"");
        let e = expect_status(&reply, 409, "GET", path);
        assert_eq!(e["error"], "tiering is off for this VM");
    }
}

#[test]
fn chunked_bodies_are_411() {
    let f = Fixture::new();
    let mut conn = f.raw();
    conn.send(
        b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          2\r\n{}\r\n0\r\n\r\n",
    );
    let reply = conn.read_reply();
    let e = expect_status(&reply, 411, "PUT", CREATE);
    assert!(e["error"].as_str().unwrap().contains("content-length"));
    assert!(conn.is_closed());
}

#[test]
fn huge_bodies_are_413_before_they_are_read() {
    let f = Fixture::with(|c| c.max_body_bytes = 4096);
    let mut conn = f.raw();
    // Only the head is sent: the answer must not wait for the body.
    conn.send(b"PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n");
    let reply = conn.read_reply();
    let e = expect_status(&reply, 413, "PUT", CREATE);
    assert_eq!(
        e["detail"],
        json!({ "length": 1073741824u64, "limit": 4096 })
    );
    assert!(conn.is_closed());

    let mut conn = f.raw();
    conn.send(
        b"PUT /api/v1/vm.tiering HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    );
    let e = conn.read_reply().json();
    assert_eq!(e["detail"]["field"], "content-length", "{e}");

    // At the limit is fine (and then refused for what it says).
    let body = format!("{{\"id\": \"{}\"}}", "a".repeat(4096 - 10));
    assert_eq!(body.len(), 4096);
    let reply = f.raw().request("PUT", CREATE, body.as_bytes());
    assert_eq!(reply.status, 400);
}

#[test]
fn oversized_heads_are_431() {
    let f = Fixture::with(|c| {
        c.max_head_bytes = 1024;
        c.max_headers = 8;
    });
    let mut conn = f.raw();
    conn.send(
        format!(
            "GET /api/v1/vmm.ping HTTP/1.1\r\nX-Big: {}\r\n\r\n",
            "a".repeat(2000)
        )
        .as_bytes(),
    );
    let reply = conn.read_reply();
    expect_status(&reply, 431, "GET", "/api/v1/vmm.ping");

    let mut conn = f.raw();
    let many: String = (0..9).map(|i| format!("X-{i}: 1\r\n")).collect();
    conn.send(format!("GET /api/v1/vmm.ping HTTP/1.1\r\n{many}\r\n").as_bytes());
    assert_eq!(conn.read_reply().status, 431);
}

#[test]
fn garbage_is_400() {
    let f = Fixture::new();
    for garbage in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"[..],
        b"GET /api/v1/vmm.ping HTTP/9.9\r\n\r\n",
        b"GET /api/v1/vmm.ping HTTP/1.1\r\nBad Header: x\r\n\r\n",
        b"GET /api/v1/vmm.ping HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n",
    ] {
        let mut conn = f.raw();
        conn.send(garbage);
        let reply = conn.read_reply();
        assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(garbage));
        assert!(!reply.json()["error"].as_str().unwrap().is_empty());
    }
}

#[test]
fn internal_faults_are_500_and_the_server_goes_on() {
    let f = Fixture::new();
    f.create_vm();
    f.vmm.fail_counters.store(true, Ordering::SeqCst);
    let reply = f.raw().request("GET", "/api/v1/vm.counters", b"");
    let e = expect_status(&reply, 500, "GET", "/api/v1/vm.counters");
    assert_eq!(e["error"], "internal error: counter page unreadable");
    // /metrics fails too rather than leave series out silently.
    assert_eq!(f.raw().request("GET", "/metrics", b"").status, 500);

    f.vmm.panic_info.store(true, Ordering::SeqCst);
    let reply = f.raw().request("GET", "/api/v1/vm.info", b"");
    let e = expect_status(&reply, 500, "GET", "/api/v1/vm.info");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("vm_info asked to panic"),
        "{e}"
    );
    assert_eq!(f.raw().request("GET", "/api/v1/vmm.ping", b"").status, 200);
}
