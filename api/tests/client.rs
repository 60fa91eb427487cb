//! The blocking client: what `tierctl` sees of successes and errors.

mod common;

use std::time::Duration;

use serde_json::json;

use api::types::{VmInfo, VmmPingResponse};
use api::{ApiClient, ClientError};
use common::{Fixture, TempDir};

#[test]
fn errors_carry_the_servers_error_body() {
    let f = Fixture::new();
    let c = f.client();
    match c.put_json("/api/v1/vm.create", &json!({ "vcpus": "two" })) {
        Err(ClientError::Api { status, body }) => {
            assert_eq!(status, 400);
            assert_eq!(body.detail["field"], "vcpus");
            assert!(
                body.error
                    .starts_with("vcpus: invalid type: string \"two\"")
            );
        }
        other => panic!("{other:?}"),
    }
    let e = c.get_json::<VmInfo>("/api/v1/vm.info").unwrap_err();
    assert_eq!(e.to_string(), "404: no VM has been created");
    // request() returns any status as it is.
    let raw = c.request("GET", "/api/v1/vm.nothing", None).unwrap();
    assert_eq!(raw.status, 404);
    assert!(!raw.is_success());
    assert_eq!(raw.header("Content-Type"), Some("application/json"));
    assert_eq!(raw.error_body().error, "no route /api/v1/vm.nothing");
}

#[test]
fn typed_decoding_and_its_failure() {
    let f = Fixture::new();
    let c = f.client();
    let ping: VmmPingResponse = c.get_json("/api/v1/vmm.ping").unwrap();
    assert_eq!(ping.version, env!("CARGO_PKG_VERSION"));
    match c.get_json::<Vec<u32>>("/api/v1/vmm.ping") {
        Err(ClientError::Decode { path, .. }) => assert_eq!(path, "/api/v1/vmm.ping"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_server_is_a_connect_error() {
    let dir = TempDir::new();
    let c = ApiClient::unix(dir.path().join("none.sock")).with_timeout(Duration::from_secs(1));
    match c.get_json::<VmmPingResponse>("/api/v1/vmm.ping") {
        Err(e @ ClientError::Connect { .. }) => {
            assert!(e.to_string().contains("none.sock"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let tcp = ApiClient::tcp("127.0.0.1:1".parse().unwrap(), Some("t".into()));
    assert!(format!("{tcp:?}").contains("<redacted>"));
    assert!(matches!(
        tcp.request("GET", "/metrics", None),
        Err(ClientError::Connect { .. })
    ));
}
