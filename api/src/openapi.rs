//! The OpenAPI document of the REST API, generated from the route table
//! (each handler's `#[utoipa::path]`) and the request and response types.
//! `api/openapi.json` is its committed copy; a test fails when the two
//! differ (`UPDATE_OPENAPI=1 cargo test -p api --test openapi` rewrites
//! the file).

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    Components, Content, ObjectBuilder, OpenApi as Document, Ref, RefOr, Response, ResponseBuilder,
    Type,
};
use utoipa::{Modify, OpenApi};

use crate::server::routes::api_routes;

mod closed_objects;

/// Statuses every route can answer, with the response component each
/// refers to: the request line and headers, auth, framing and limits are
/// checked before a route's handler runs, and a fault in it is a 500.
const COMMON_RESPONSES: [(u16, &str, &str); 7] = [
    (
        400,
        "BadRequest",
        "The request is malformed: a bad request line or header, a query string on a route \
         that takes none, or a body on a route that takes none",
    ),
    (
        401,
        "Unauthorized",
        "TCP only: the bearer token is missing or wrong",
    ),
    (
        408,
        "RequestTimeout",
        "The request did not arrive in full within the request timeout",
    ),
    (
        411,
        "LengthRequired",
        "The body was sent with Transfer-Encoding; send it with Content-Length",
    ),
    (
        431,
        "HeaderTooLarge",
        "The request line and headers exceed the size or count limit",
    ),
    (
        500,
        "InternalError",
        "A fault inside the VMM or the server, not the caller's",
    ),
    (
        503,
        "Unavailable",
        "Too many connections are open; retry after the Retry-After seconds",
    ),
];

/// The status routes with a request body add, and its component.
const TOO_LARGE: (u16, &str, &str) = (
    413,
    "PayloadTooLarge",
    "The Content-Length exceeds the body limit (1 MiB unless configured otherwise)",
);

macro_rules! api_doc {
    ($($handler:ident, $doc:ident;)*) => {
        /// The OpenAPI document of the API.
        #[derive(Debug, OpenApi)]
        #[openapi(
            info(
                title = "tiervisor",
                description = "Operator API of tiervisor, a KVM VMM with memory tiering: the VM's \
                    lifecycle, its tiering policy, live rebalancing and metrics. Served over a \
                    unix socket (`--api-socket`) and optionally TCP with a bearer token \
                    (`--api-tcp`, `--api-token-file`). Errors are `ErrorBody` JSON.",
                license(name = "Apache-2.0", identifier = "Apache-2.0"),
            ),
            paths($(crate::server::handlers::$handler),*),
            components(schemas(crate::types::ErrorBody)),
            modifiers(&CommonResponses),
            tags(
                (name = "vmm", description = "The VMM process"),
                (name = "vm", description = "The VM's lifecycle and counters"),
                (name = "tiering", description = "Tiering policy, engine state, rebalancing"),
                (name = "metrics", description = "Prometheus metrics"),
            ),
        )]
        pub struct ApiDoc;
    };
}

api_routes!(api_doc);

/// The document as pretty JSON with a final newline, as committed in
/// `api/openapi.json`.
pub fn openapi_json() -> String {
    let doc = ApiDoc::openapi();
    // Serialising utoipa's own document types cannot fail.
    let mut json = doc.to_pretty_json().unwrap_or_default();
    json.push('\n');
    json
}

/// Adds the responses every route shares, the 413 of routes with a body,
/// and the bearer-token scheme.
struct CommonResponses;

impl Modify for CommonResponses {
    fn modify(&self, doc: &mut Document) {
        // The version is the crate's, not utoipa's default (also the crate's
        // but only when built by cargo).
        doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
        let components = doc.components.get_or_insert_with(Components::new);
        for (status, name, description) in COMMON_RESPONSES.iter().chain([&TOO_LARGE]) {
            components.responses.insert(
                (*name).to_owned(),
                RefOr::T(error_response(*status, description)),
            );
        }
        components.security_schemes.insert(
            "bearer".to_owned(),
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The token of --api-token-file; needed on TCP only (the unix socket \
                         is guarded by its file mode, 0600)",
                    ))
                    .build(),
            ),
        );
        // No requirement (unix socket) or the bearer token (TCP).
        doc.security = Some(vec![
            SecurityRequirement::default(),
            SecurityRequirement::new("bearer", Vec::<String>::new()),
        ]);
        closed_objects::close_request_objects(doc);
        for item in doc.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.options,
                &mut item.head,
                &mut item.patch,
                &mut item.trace,
            ];
            for operation in operations.into_iter().flatten() {
                add_common(operation);
            }
        }
    }
}

fn add_common(operation: &mut Operation) {
    let mut add = |(status, name, _): &(u16, &str, &str)| {
        operation
            .responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| RefOr::Ref(Ref::from_response_name(*name)));
    };
    COMMON_RESPONSES.iter().for_each(&mut add);
    if operation.request_body.is_some() {
        add(&TOO_LARGE);
    }
}

/// An `ErrorBody` response, with the headers its status carries.
fn error_response(status: u16, description: &str) -> Response {
    let mut response = ResponseBuilder::new().description(description).content(
        "application/json",
        Content::new(Some(Ref::from_schema_name("ErrorBody"))),
    );
    let header = |text: &str, ty: Type| {
        HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(ty))
            .description(Some(text))
            .build()
    };
    match status {
        401 => {
            response = response.header(
                "WWW-Authenticate",
                header("`Bearer realm=\"tiervisor\"`", Type::String),
            );
        }
        503 => {
            response = response.header(
                "Retry-After",
                header("Seconds to wait before retrying", Type::Integer),
            );
        }
        _ => {}
    }
    response.build()
}
