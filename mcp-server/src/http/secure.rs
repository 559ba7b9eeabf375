//! HTTPS: each accepted connection through a TLS handshake first (feature `tls`), then HTTP/2
//! or HTTP/1.1 as ALPN chose, with the same admission, service and limits as plain HTTP.

#[cfg(feature = "tls")]
pub(super) use on::Secure;

/// Without `tls` there is no handshake to do: the accept loop's `Option<Secure>` is always
/// `None`.
#[cfg(not(feature = "tls"))]
pub(super) type Secure = std::convert::Infallible;

#[cfg(feature = "tls")]
mod on {
    use std::io;
    use std::net::SocketAddr;
    use std::pin::pin;
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::future::{select, Either};

    use super::super::{ClientChain, HttpService, Listener, Switch};
    use crate::runtime::Runtime;
    use crate::tls::{HyperStream, TlsConfig, H2_MAX_STREAMS};

    /// How often an HTTP/2 connection is pinged when idle, and how long a ping may go
    /// unanswered before the connection is closed: 30 s and 20 s.
    const H2_PING: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(20));

    /// What a handshake needs: the acceptor and its time bound.
    pub(crate) type Secure = Arc<(futures_rustls::TlsAcceptor, Duration)>;

    /// Spawns on the server's runtime what hyper's HTTP/2 connection needs run beside it.
    #[derive(Clone)]
    struct Exec(Arc<dyn Runtime>);

    impl<F> hyper::rt::Executor<F> for Exec
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        fn execute(&self, fut: F) {
            self.0.spawn(Box::pin(fut));
        }
    }

    impl HttpService {
        /// [`serve`](Self::serve) over TLS: each connection is admitted as a plain one is (the
        /// same connection limits and shares), then must complete its handshake within
        /// [`TlsConfig::handshake_timeout`] (10 s by default; past it, or on a failed
        /// handshake, it is closed). It is then served with HTTP/2 when the client chose `h2`
        /// by ALPN (at most [`H2_MAX_STREAMS`] requests at once on it), HTTP/1.1 otherwise.
        /// Fails at once when rustls refuses the configuration.
        ///
        /// The certificate is read from `tls` at every handshake: [`TlsConfig::reload`] takes
        /// effect for the next connection.
        pub async fn serve_tls<L, T>(&self, listener: L, timer: T, tls: TlsConfig) -> io::Result<()>
        where
            L: Listener,
            T: hyper::rt::Timer + Clone + Send + Sync + 'static,
        {
            let acceptor = tls.acceptor().map_err(io::Error::other)?;
            self.accept_loop(listener, timer, Some(Arc::new((acceptor, tls.handshake_time())))).await
        }

        /// Serves one admitted connection over TLS.
        pub(in crate::http) async fn serve_secure<I, T>(
            &self,
            io: I,
            timer: T,
            peer: SocketAddr,
            switch: Switch,
            secure: &Secure,
        ) where
            I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
            T: hyper::rt::Timer + Send + Sync + 'static,
        {
            let (acceptor, timeout) = &**secure;
            let rt = self.inner.rt.clone();
            let deadline = rt.now().checked_add(*timeout);
            let handshake = crate::runtime::within(rt.as_ref(), deadline, acceptor.accept(HyperStream(io)));
            // A connection displaced while it handshakes is cut like any other.
            let stream = match select(pin!(handshake), pin!(switch.cut_off.recv())).await {
                Either::Left((Some(Ok(stream)), _)) => stream,
                Either::Left((Some(Err(e)), _)) => {
                    return tracing::debug!(%peer, error = %e, "TLS handshake failed");
                }
                Either::Left((None, _)) => return tracing::debug!(%peer, "TLS handshake timed out"),
                Either::Right(_) => return tracing::debug!(%peer, "cut a connection in its TLS handshake"),
            };
            let tls = stream.get_ref().1;
            let h2 = tls.alpn_protocol() == Some(b"h2");
            let chain = tls.peer_certificates().filter(|chain| !chain.is_empty());
            let switch = Switch {
                chain: chain.map(|chain| ClientChain(chain.iter().map(|c| c.as_ref().to_vec()).collect())),
                ..switch
            };
            let io = crate::FuturesIo::new(stream);
            if h2 {
                self.serve_h2(io, timer, peer, switch).await;
            } else {
                self.serve_admitted(io, timer, peer, switch).await;
            }
        }

        /// Serves one HTTP/2 connection until it closes or is cut.
        async fn serve_h2<I, T>(&self, io: I, timer: T, peer: SocketAddr, switch: Switch)
        where
            I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
            T: hyper::rt::Timer + Send + Sync + 'static,
        {
            let limits = self.inner.server.limits();
            let cut_off = switch.cut_off.clone();
            let service = self.connection_service(peer, switch);
            let mut builder = hyper::server::conn::http2::Builder::new(Exec(self.inner.rt.clone()));
            builder
                .timer(timer)
                .max_concurrent_streams(H2_MAX_STREAMS)
                // The same bound on a request's head as HTTP/1.1's (HPACK-decoded size).
                .max_header_list_size(
                    u32::try_from(super::super::hyper_buf_size(limits.head_bytes())).unwrap_or(u32::MAX),
                )
                .keep_alive_interval(Some(H2_PING.0))
                .keep_alive_timeout(H2_PING.1);
            self.until_cut(peer, builder.serve_connection(io, service), cut_off).await;
        }
    }
}
