//! The stream adapter: rustls under tokio-postgres's TLS hook ([`MakeRustls`]), the
//! TLS stream it yields with the channel binding SCRAM asks for, and the error of a
//! failed handshake.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use super::verify::tls_server_end_point;

/// The TLS handshake failed: the host it was for and why (rustls's error when it
/// was one, else the I/O error's message).
#[derive(Debug)]
pub(super) struct HandshakeError {
    pub(super) host: String,
    pub(super) rustls: Option<rustls::Error>,
    pub(super) message: String,
}

impl HandshakeError {
    fn new(host: String, err: &io::Error) -> Self {
        let rustls = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .cloned();
        Self {
            host,
            rustls,
            message: err.to_string(),
        }
    }

    pub(super) fn clone_parts(&self) -> Self {
        Self {
            host: self.host.clone(),
            rustls: self.rustls.clone(),
            message: self.message.clone(),
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the TLS handshake with {:?} failed: {}",
            self.host, self.message
        )
    }
}

impl StdError for HandshakeError {}

/// tokio-postgres's TLS hook: one [`RustlsConnect`] per host it connects to.
pub(super) struct MakeRustls(pub(super) Arc<ClientConfig>);

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        // called before the server says whether it speaks TLS, also for a Unix
        // socket (with an empty name): a bad name fails the handshake, if any
        let name = ServerName::try_from(domain.to_string())
            .map_err(|err| format!("{domain:?} is not a host name TLS can verify: {err}"));
        Ok(RustlsConnect {
            config: Arc::clone(&self.0),
            host: domain.to_string(),
            name,
        })
    }
}

pub(super) struct RustlsConnect {
    config: Arc<ClientConfig>,
    host: String,
    name: Result<ServerName<'static>, String>,
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = HandshakeError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream, HandshakeError>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let name = self.name.map_err(|reason| {
                HandshakeError::new(
                    self.host.clone(),
                    &io::Error::new(io::ErrorKind::InvalidInput, reason),
                )
            })?;
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(name, stream)
                .await
                .map_err(|err| HandshakeError::new(self.host, &err))?;
            Ok(RustlsStream(stream))
        })
    }
}

/// A TLS connection to the server, with the channel binding SCRAM asks for.
pub(super) struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| tls_server_end_point(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}
