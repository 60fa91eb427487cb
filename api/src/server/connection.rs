//! One connection: requests in order (HTTP/1.1 keep-alive), each checked
//! — auth, framing, route, query, body — before its handler runs.

use std::any::Any;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use crate::control::VmmControl;
use crate::server::api_error::ApiError;
use crate::server::auth;
use crate::server::request::{Limits, ReadError, RequestHead, RequestReader};
use crate::server::response::{AfterResponse, Connection, Response};
use crate::server::router::{Request, Router};
use crate::server::shutdown::ShutdownSignal;
use crate::server::stream::{Stream, Transport};

/// What every connection shares.
pub(crate) struct Context {
    /// The VMM.
    pub control: Arc<dyn VmmControl>,
    /// The routes.
    pub router: Router,
    /// Request limits.
    pub limits: Limits,
    /// How long writing a response may take.
    pub write_timeout: Duration,
    /// The token TCP clients must present.
    pub token: Option<String>,
    /// Set once `vmm.shutdown` has been answered.
    pub shutdown: ShutdownSignal,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("router", &self.router)
            .field("limits", &self.limits)
            .field("write_timeout", &self.write_timeout)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// A response, and whether the request's body was read (if not, the
/// connection must close: its bytes would be taken for the next request).
struct Outcome {
    response: Response,
    body_read: bool,
}

/// Serves requests on `stream` until the client closes it, idles past
/// the idle timeout, asks to close, or breaks the protocol.
pub(crate) fn serve(stream: Stream, ctx: &Context) {
    let transport = stream.transport();
    if stream.set_write_timeout(Some(ctx.write_timeout)).is_err() {
        return;
    }
    let mut reader = RequestReader::new(stream, ctx.limits);
    loop {
        let head = match reader.next_head() {
            Ok(Some(head)) => head,
            Ok(None) | Err(ReadError::Gone) => return,
            Err(ReadError::Respond(e)) => {
                // The client may be gone already: nothing more to do.
                if Response::from(e)
                    .write_to(reader.stream(), Connection::Close)
                    .is_ok()
                {
                    reader.into_stream().close_lingering();
                }
                return;
            }
        };
        let Some(mut outcome) = dispatch(&head, transport, &mut reader, ctx) else {
            return;
        };
        // No route takes HEAD (405), but its answer still has no body.
        if head.method == "HEAD" {
            outcome.response = outcome.response.without_body();
        }
        let after = outcome.response.after();
        let close = !head.keep_alive() || !outcome.body_read || after.is_some();
        let connection = match (close, head.minor_version) {
            (true, _) => Connection::Close,
            (false, 0) => Connection::KeepAlive,
            (false, _) => Connection::Default,
        };
        let written = outcome.response.write_to(reader.stream(), connection);
        // The VM is stopped whether or not the client heard it.
        if after == Some(AfterResponse::ShutdownVmm) {
            ctx.shutdown.notify();
        }
        if written.is_err() {
            return;
        }
        if close {
            reader.into_stream().close_lingering();
            return;
        }
    }
}

/// Checks a request and runs its handler; `None` if the client went away.
fn dispatch(
    head: &RequestHead,
    transport: Transport,
    reader: &mut RequestReader,
    ctx: &Context,
) -> Option<Outcome> {
    let refuse = |e: ApiError, body_read: bool| {
        Some(Outcome {
            response: Response::from(e),
            body_read,
        })
    };
    if transport == Transport::Tcp {
        let checked = match &ctx.token {
            Some(token) => auth::check_bearer(head, token),
            None => Err(ApiError::Unauthorized("no token is configured for TCP")),
        };
        if let Err(e) = checked {
            return refuse(e, false);
        }
    }
    let length = match head.body_length() {
        Ok(length) => length,
        Err(e) => return refuse(e, false),
    };
    let no_body = length == 0;
    let route = match ctx.router.find(&head.method, &head.path) {
        Ok(route) => route,
        Err(e) => return refuse(e, no_body),
    };
    if !route.takes_query && head.query.as_deref().is_some_and(|q| !q.is_empty()) {
        let e = ApiError::bad_field(
            Some("query"),
            format!("{} {} takes no query parameters", route.method, route.path),
        );
        return refuse(e, no_body);
    }
    if !route.takes_body && !no_body {
        let e = ApiError::bad_field(
            Some("body"),
            format!("{} {} takes no request body", route.method, route.path),
        );
        return refuse(e, false);
    }
    let limit = ctx.limits.max_body_bytes;
    let length = match usize::try_from(length) {
        Ok(l) if l <= limit => l,
        _ => return refuse(ApiError::PayloadTooLarge { length, limit }, false),
    };
    let mut body = Vec::new();
    if length > 0 {
        if head.expects_continue() {
            let stream = reader.stream();
            stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .and_then(|()| stream.flush())
                .ok()?;
        }
        body = match reader.read_body(length, head.deadline) {
            Ok(body) => body,
            Err(ReadError::Respond(e)) => return refuse(e, false),
            Err(ReadError::Gone) => return None,
        };
    }
    let request = Request {
        query: head.query.as_deref(),
        body: &body,
    };
    let handled = catch_unwind(AssertUnwindSafe(|| {
        (route.handler)(&*ctx.control, &request)
    }));
    let response = match handled {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => Response::from(e),
        Err(panic) => Response::from(ApiError::Internal(format!(
            "handler panicked: {}",
            panic_message(&panic)
        ))),
    };
    Some(Outcome {
        response,
        body_read: true,
    })
}

fn panic_message(panic: &Box<dyn Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown cause")
}
