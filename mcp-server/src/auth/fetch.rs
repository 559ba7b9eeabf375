//! The requests a resource server makes of its authorization server (metadata, key set,
//! introspection): one HTTP/1.1 exchange on a connection of its own, opened through the
//! shim's [`Runtime::connect`], bounded in time and in the size of the answer.

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut as _, Bytes};
use futures_util::future::{select, Either};
use http::{HeaderValue, Method, Request, Uri};
use http_body::Body as _;

use crate::cluster::pool::Full;
use crate::runtime::Runtime;

/// Why a request to the authorization server gave nothing usable. Each is logged and makes
/// the token check fail closed ([`Denial::Unavailable`](mcp_proto::auth::Denial::Unavailable)
/// when no keys are held).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// The URL is not `http://` or `https://` with a host.
    Url(String),
    /// The TLS handshake failed (an untrusted or mismatched certificate, most often).
    Tls(String),
    /// The connection could not be opened, or broke.
    Connect(String),
    /// No complete answer within the fetch timeout.
    Timeout,
    /// An answer other than `200`.
    Status(u16),
    /// An answer larger than the document's bound.
    TooLarge,
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(why) => write!(f, "cannot fetch from this URL: {why}"),
            Self::Connect(why) => write!(f, "connection failed: {why}"),
            Self::Tls(why) => write!(f, "TLS failed: {why}"),
            Self::Timeout => f.write_str("no answer in time"),
            Self::Status(status) => write!(f, "answered {status}"),
            Self::TooLarge => f.write_str("the answer is larger than its bound"),
        }
    }
}

impl std::error::Error for FetchError {}

/// One request to send: `GET` without a body, or `POST` of a form.
pub(crate) struct Outgoing<'a> {
    pub(crate) url: &'a str,
    /// A form body (`application/x-www-form-urlencoded`), sent with `POST`.
    pub(crate) form: Option<String>,
    /// An `Authorization` value for the request (the resource server's own client credentials
    /// at the introspection endpoint).
    pub(crate) authorization: Option<String>,
    /// The roots an `https://` URL's certificate is checked against.
    pub(crate) roots: &'a Roots,
}

/// The certificate authorities trusted for `https://` fetches: the Mozilla roots
/// (`webpki-roots`), and any added with [`Roots::with_pem`].
#[derive(Clone)]
pub(crate) struct Roots(
    Arc<std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>>,
    Arc<[rustls_pki_types::CertificateDer<'static>]>,
);

impl Default for Roots {
    fn default() -> Self {
        Self(Arc::default(), Arc::new([]))
    }
}

impl Roots {
    /// The Mozilla roots and the certificates in `pem`; `None` when it holds none.
    pub(crate) fn with_pem(pem: &[u8]) -> Option<Self> {
        let extra = crate::tls::roots_from_pem(pem)?;
        Some(Self(Arc::default(), extra.into()))
    }

    fn config(&self) -> Result<Arc<rustls::ClientConfig>, FetchError> {
        self.0
            .get_or_init(|| crate::tls::client_config(&self.1).map_err(|e| e.to_string()))
            .clone()
            .map_err(FetchError::Tls)
    }
}

/// Sends `out` and reads its `200` answer, at most `max` bytes, all within `timeout`.
pub(crate) async fn fetch(
    rt: &Arc<dyn Runtime>,
    out: Outgoing<'_>,
    max: usize,
    timeout: Duration,
) -> Result<Vec<u8>, FetchError> {
    let deadline = rt.now().checked_add(timeout);
    crate::runtime::within(rt.as_ref(), deadline, exchange(rt, out, max))
        .await
        .unwrap_or(Err(FetchError::Timeout))
}

async fn exchange(rt: &Arc<dyn Runtime>, out: Outgoing<'_>, max: usize) -> Result<Vec<u8>, FetchError> {
    let uri: Uri = out.url.parse().map_err(|e| FetchError::Url(format!("{e}")))?;
    let secure = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(FetchError::Url("only http:// and https:// are fetched".into())),
    };
    let host = uri.host().ok_or_else(|| FetchError::Url("no host".into()))?;
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    // The connection is opened to the bare name or address; `[::1]` connects as `::1`.
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();

    let io = rt.connect(bare.clone(), port).await.map_err(|e| FetchError::Connect(e.to_string()))?;
    let io: crate::BoxIo = if secure {
        let name = rustls_pki_types::ServerName::try_from(bare)
            .map_err(|e| FetchError::Url(format!("not a TLS server name: {e}")))?;
        let connector = futures_rustls::TlsConnector::from(out.roots.config()?);
        let stream = connector
            .connect(name, crate::tls::HyperStream(io))
            .await
            .map_err(|e| FetchError::Tls(e.to_string()))?;
        Box::new(crate::FuturesIo::new(stream))
    } else {
        io
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Full>(io)
        .await
        .map_err(|e| FetchError::Connect(format!("handshake: {e}")))?;
    // The connection's task ends with the exchange: it is dropped with this future.
    let conn = pin!(conn);
    let request = async {
        let method = if out.form.is_some() { Method::POST } else { Method::GET };
        let mut req = Request::new(Full(out.form.map(Bytes::from)));
        *req.method_mut() = method;
        *req.uri_mut() = path.parse().map_err(|e| FetchError::Url(format!("{e}")))?;
        let headers = req.headers_mut();
        let value =
            |v: &str| HeaderValue::from_str(v).map_err(|_| FetchError::Url("not a header value".into()));
        headers.insert(http::header::HOST, value(&authority)?);
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(form) = req.body().0.as_ref() {
            let len = form.len();
            let headers = req.headers_mut();
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            );
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        }
        if let Some(auth) = &out.authorization {
            let mut v = value(auth)?;
            v.set_sensitive(true);
            req.headers_mut().insert(http::header::AUTHORIZATION, v);
        }
        let resp = sender.send_request(req).await.map_err(|e| FetchError::Connect(e.to_string()))?;
        if resp.status() != http::StatusCode::OK {
            return Err(FetchError::Status(resp.status().as_u16()));
        }
        let mut body = pin!(resp.into_body());
        if body.size_hint().lower() > max as u64 {
            return Err(FetchError::TooLarge);
        }
        let mut bytes = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| FetchError::Connect(e.to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            if bytes.len().saturating_add(data.len()) > max {
                return Err(FetchError::TooLarge);
            }
            bytes.put(data);
        }
        Ok(bytes)
    };
    let answer = match select(pin!(request), conn).await {
        Either::Left((answer, _)) => answer,
        // The connection ended first: the answer may still be complete in hyper's buffers.
        Either::Right((Ok(()), request)) => request.await,
        Either::Right((Err(e), _)) => Err(FetchError::Connect(e.to_string())),
    };
    answer
}
