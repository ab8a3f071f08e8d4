//! Responses: a page, a JSON document, or a [`Fail`] answered as either.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;

/// An error answered as a page (or JSON under `/api/`).
#[derive(Debug)]
pub(super) struct Fail {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

impl Fail {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Fail {
            status,
            message: message.into(),
        }
    }

    pub(super) fn bad(message: impl Into<String>) -> Self {
        Fail::new(StatusCode::BAD_REQUEST, message)
    }

    pub(super) fn from_publish(e: &guideloom::publish::Error) -> Self {
        let status = match e.kind() {
            guideloom::ErrorKind::NotFound | guideloom::ErrorKind::OutOfRange => {
                StatusCode::NOT_FOUND
            }
            guideloom::ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
            _ => StatusCode::BAD_GATEWAY,
        };
        Fail::new(status, e.to_string())
    }
}

/// What a route answers.
pub(super) type Reply = Result<Response<Full<Bytes>>, Fail>;

/// A response of `status` and `content_type` (the security headers are added later, to
/// every response, by the server).
pub(super) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}

pub(super) fn html_page(body: String) -> Reply {
    Ok(respond(StatusCode::OK, "text/html; charset=utf-8", body))
}

pub(super) fn json_reply(value: &serde_json::Value) -> Reply {
    Ok(respond(
        StatusCode::OK,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    ))
}
