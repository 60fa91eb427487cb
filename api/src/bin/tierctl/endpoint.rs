//! The API as tierctl calls it: which server, the paths, and a request
//! that either returns a 2xx body or says why not.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use api::client::ApiClient;

use crate::cli::TargetArgs;
use crate::error::TierctlError;

/// Prefix of every VM and VMM endpoint.
pub const API_PREFIX: &str = "/api/v1/";

/// `/api/v1/NAME`.
pub fn api_path(name: &str) -> String {
    format!("{API_PREFIX}{name}")
}

/// The `vm.tiering.frames` path for a page; absent values are left to the
/// server.
pub fn frames_path(offset: Option<u64>, limit: Option<u64>) -> String {
    let query: Vec<String> = [("offset", offset), ("limit", limit)]
        .into_iter()
        .filter_map(|(key, value)| value.map(|v| format!("{key}={v}")))
        .collect();
    let base = api_path("vm.tiering.frames");
    if query.is_empty() {
        base
    } else {
        format!("{base}?{}", query.join("&"))
    }
}

/// One API server.
#[derive(Debug)]
pub struct Endpoint {
    client: ApiClient,
    target: String,
}

impl Endpoint {
    /// The server `args` name; `socket_env` is `$TIERVISOR_API_SOCKET`.
    pub fn new(
        args: &TargetArgs,
        socket_env: Option<std::ffi::OsString>,
    ) -> Result<Self, TierctlError> {
        if let Some(addr) = args.api_tcp {
            let token = args.token_file.as_deref().map(read_token).transpose()?;
            return Ok(Endpoint {
                client: ApiClient::tcp(addr, token),
                target: format!("tcp {addr}"),
            });
        }
        let socket = args.socket(socket_env);
        Ok(Endpoint {
            target: format!("unix socket {}", socket.display()),
            client: ApiClient::unix(socket),
        })
    }

    /// `unix socket PATH` or `tcp ADDR`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// `METHOD path` with an optional JSON body: the body of a 2xx
    /// response, [`TierctlError::Refused`] for any other status.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Vec<u8>, TierctlError> {
        let response = self.client.request(method, path, body).map_err(|source| {
            TierctlError::Unreachable {
                target: self.target.clone(),
                source,
            }
        })?;
        if (200..300).contains(&response.status) {
            Ok(response.body)
        } else {
            Err(TierctlError::Refused {
                status: response.status,
                body: response.body,
            })
        }
    }

    /// `GET path`, returning the raw body and its parsed value.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<(Vec<u8>, T), TierctlError> {
        let raw = self.call("GET", path, None)?;
        let value = parse_body(path, &raw)?;
        Ok((raw, value))
    }
}

/// A 2xx body parsed as what `path` returns; an empty body (a 204, as
/// `GET vm.rebalance` answers before any rebalance) reads as JSON `null`,
/// which an `Option` takes as `None`.
pub fn parse_body<T: DeserializeOwned>(path: &str, raw: &[u8]) -> Result<T, TierctlError> {
    let raw: &[u8] = if raw.trim_ascii().is_empty() {
        b"null"
    } else {
        raw
    };
    serde_json::from_slice(raw).map_err(|source| TierctlError::BadResponse {
        path: path.to_owned(),
        source,
    })
}

fn read_token(path: &Path) -> Result<String, TierctlError> {
    let text = std::fs::read_to_string(path).map_err(|source| TierctlError::ReadInput {
        path: path.to_owned(),
        source,
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TierctlError::EmptyToken(PathBuf::from(path)));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_cloud_hypervisor_naming() {
        assert_eq!(api_path("vmm.ping"), "/api/v1/vmm.ping");
        assert_eq!(frames_path(None, None), "/api/v1/vm.tiering.frames");
        assert_eq!(
            frames_path(Some(10), Some(20)),
            "/api/v1/vm.tiering.frames?offset=10&limit=20"
        );
        assert_eq!(
            frames_path(None, Some(5)),
            "/api/v1/vm.tiering.frames?limit=5"
        );
    }

    #[test]
    fn empty_bodies_read_as_null() {
        assert_eq!(parse_body::<Option<u32>>("/p", b"").unwrap(), None);
        assert_eq!(parse_body::<Option<u32>>("/p", b"null").unwrap(), None);
        assert_eq!(parse_body::<Option<u32>>("/p", b"7").unwrap(), Some(7));
        assert!(matches!(
            parse_body::<u32>("/p", b" "),
            Err(TierctlError::BadResponse { .. })
        ));
    }

    #[test]
    fn token_files_are_trimmed_and_must_hold_a_token() {
        let dir = std::env::temp_dir().join(format!("tierctl-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "  s3cret\n").unwrap();
        assert_eq!(read_token(&good).unwrap(), "s3cret");
        let empty = dir.join("empty");
        std::fs::write(&empty, "\n").unwrap();
        assert!(matches!(
            read_token(&empty),
            Err(TierctlError::EmptyToken(_))
        ));
        assert!(matches!(
            read_token(&dir.join("missing")),
            Err(TierctlError::ReadInput { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
