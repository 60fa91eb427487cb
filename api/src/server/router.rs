//! Finds the route for a method and path: 404 for an unknown path, 405
//! (with the methods the path takes) for a known path and another method.

use utoipa::openapi::path::HttpMethod;

use crate::control::VmmControl;
use crate::server::api_error::ApiError;
use crate::server::handlers;
use crate::server::response::Response;
use crate::server::routes::api_routes;

/// What a handler gets of a request (the router has checked that a body
/// or query is present only where the route's documentation has one).
#[derive(Debug)]
pub(crate) struct Request<'a> {
    /// The query string, if any.
    pub query: Option<&'a str>,
    /// The body (empty if none was sent).
    pub body: &'a [u8],
}

/// A route handler.
pub(crate) type Handler = fn(&dyn VmmControl, &Request<'_>) -> Result<Response, ApiError>;

/// One method on one path.
#[derive(Debug)]
pub(crate) struct Route {
    /// `GET`, `PUT`, ...
    pub method: &'static str,
    /// The path, e.g. `/api/v1/vm.info`.
    pub path: String,
    /// Whether the route documents a request body (else a body is refused).
    pub takes_body: bool,
    /// Whether the route documents query parameters (else a query is
    /// refused).
    pub takes_query: bool,
    /// Its handler.
    pub handler: Handler,
}

impl Route {
    /// The routes of `handler`, documented by path item `P`.
    fn documented<P: utoipa::Path>(handler: Handler) -> impl Iterator<Item = Route> {
        let operation = P::operation();
        let takes_body = operation.request_body.is_some();
        let takes_query = operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
        let path = P::path();
        P::methods().into_iter().map(move |method| Route {
            method: method_name(&method),
            path: path.clone(),
            takes_body,
            takes_query,
            handler,
        })
    }
}

/// The name of an HTTP method as it appears on the wire.
pub(crate) fn method_name(method: &HttpMethod) -> &'static str {
    match method {
        HttpMethod::Get => "GET",
        HttpMethod::Post => "POST",
        HttpMethod::Put => "PUT",
        HttpMethod::Delete => "DELETE",
        HttpMethod::Options => "OPTIONS",
        HttpMethod::Head => "HEAD",
        HttpMethod::Patch => "PATCH",
        HttpMethod::Trace => "TRACE",
    }
}

macro_rules! route_table {
    ($($handler:ident, $doc:ident;)*) => {
        [$(Route::documented::<handlers::$doc>(handlers::$handler).collect::<Vec<_>>()),*]
            .into_iter()
            .flatten()
            .collect()
    };
}

/// Every route of the API.
#[derive(Debug)]
pub(crate) struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// The routes of [`api_routes`].
    pub fn new() -> Router {
        Router {
            routes: api_routes!(route_table),
        }
    }

    /// Every route.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The route for `method` on `path`.
    pub fn find(&self, method: &str, path: &str) -> Result<&Route, ApiError> {
        let mut on_path = self.routes.iter().filter(|r| r.path == path).peekable();
        if on_path.peek().is_none() {
            return Err(ApiError::NotFound(path.to_owned()));
        }
        let mut allow = Vec::new();
        for route in on_path {
            if route.method == method {
                return Ok(route);
            }
            allow.push(route.method);
        }
        Err(ApiError::MethodNotAllowed {
            method: method.to_owned(),
            path: path.to_owned(),
            allow: allow.join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_routes_and_tells_allowed_methods() {
        let router = Router::new();
        let route = router.find("PUT", "/api/v1/vm.tiering").unwrap();
        assert!(route.takes_body && !route.takes_query);
        let frames = router.find("GET", "/api/v1/vm.tiering.frames").unwrap();
        assert!(frames.takes_query && !frames.takes_body);
        assert!(matches!(
            router.find("GET", "/api/v1/nope"),
            Err(ApiError::NotFound(_))
        ));
        match router.find("DELETE", "/api/v1/vm.rebalance") {
            Err(ApiError::MethodNotAllowed { allow, .. }) => assert_eq!(allow, "PUT, GET"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_route_per_method_and_path() {
        let router = Router::new();
        let mut seen = std::collections::HashSet::new();
        for r in router.routes() {
            assert!(
                seen.insert((r.method, r.path.clone())),
                "{} {}",
                r.method,
                r.path
            );
        }
    }
}
