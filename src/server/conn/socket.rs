//! The socket of a connection: shared by reference between the stream hyper (or rustls) reads
//! and writes ([`SharedTcp`]) and the watch that sees its client leave ([`Peer`]).

use crate::api::ClientGone;
use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection's TCP stream, read and written through a shared reference (as `TcpStream`'s own
/// `poll_read` and `poll_write` do), so that [`Peer`] can hold it weakly: this is its only
/// owner.
pub(super) struct SharedTcp(pub(super) Arc<TcpStream>);

/// The most one read of a connection takes from the socket.
const MAX_READ: usize = 64 << 10;

thread_local! {
    /// Where a runtime thread's socket reads land before they are copied into hyper's buffer:
    /// one per thread rather than per connection, since a read is copied out before the poll
    /// returns, so idle connections hold no extra memory.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl AsyncRead for SharedTcp {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // hyper hands over its read buffer (8 KiB and more) uninitialised each time, and zeroing
        // it before every `recv` cost more than the `recv` (a profile of point GETs: 2.3% of the
        // server's time). So the socket is read into the thread's scratch buffer, zeroed once as
        // it grows, and only what arrived is copied over.
        let want = buf.remaining().min(MAX_READ);
        SCRATCH.with_borrow_mut(|scratch| {
            if scratch.len() < want {
                scratch.resize(want, 0);
            }
            loop {
                ready!(self.0.poll_read_ready(cx))?;
                match self.0.try_read(&mut scratch[..want]) {
                    Ok(n) => {
                        buf.put_slice(&scratch[..n]);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        })
    }
}

impl AsyncWrite for SharedTcp {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // a TCP stream has nothing to flush
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // what `TcpStream`'s own `poll_shutdown` does, through a shared reference
        Poll::Ready(socket2::SockRef::from(&*self.0).shutdown(std::net::Shutdown::Write))
    }
}

/// What it takes to see the client go away while hyper does not read (it reads nothing while the
/// body it holds is still being worked through, as with a small gzip body that inflates to a long
/// import, or while a backup waits for a client that stopped reading): the connection's socket,
/// shared with [`SharedTcp`] but not kept open by this handle. Only an import, a backup or a stream
/// duplicates the socket's descriptor, for its watch; other requests cost no descriptor. Unix only;
/// elsewhere imports stop when hyper next reads, backups when hyper's next write fails.
pub(super) struct Peer {
    #[cfg(unix)]
    socket: std::sync::Weak<TcpStream>,
}

impl Peer {
    pub(super) fn of(tcp: &Arc<TcpStream>) -> Peer {
        #[cfg(unix)]
        {
            Peer { socket: Arc::downgrade(tcp) }
        }
        #[cfg(not(unix))]
        {
            let _ = tcp;
            Peer {}
        }
    }

    /// Starts watching the socket for the client's close (a reset; its FIN too if `fin_is_gone`);
    /// the signal's receivers see `true` then. The watch ends when every receiver is dropped (the
    /// request is over).
    pub(super) fn watch(&self, fin_is_gone: bool) -> Option<ClientGone> {
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            // the watch has its own descriptor, so that the socket closes when the connection
            // ends, whatever the watch is doing
            let socket = self.socket.upgrade()?.as_fd().try_clone_to_owned().ok()?;
            let socket = Arc::new(TcpStream::from_std(std::net::TcpStream::from(socket)).ok()?);
            let (tx, rx) = tokio::sync::watch::channel(false);
            tokio::spawn(watch_peer(socket.clone(), tx, fin_is_gone));
            Some(ClientGone(rx, Some(socket)))
        }
        #[cfg(not(unix))]
        {
            let _ = fin_is_gone;
            None
        }
    }
}

/// Waits for the client to close the connection without reading anything hyper has to read:
/// the socket's readiness says "read closed" once the client's FIN (or reset) arrived, even with
/// body bytes still waiting in front of it. Readable-but-open readiness is cleared and waited on
/// again, so the watch sleeps until the socket changes. Unless `fin_is_gone`, a FIN alone (a
/// half-close: the client still reads) ends the watch without a signal.
#[cfg(unix)]
async fn watch_peer(socket: Arc<TcpStream>, gone: tokio::sync::watch::Sender<bool>, fin_is_gone: bool) {
    use tokio::io::Interest;
    loop {
        tokio::select! {
            () = gone.closed() => return,
            ready = socket.ready(Interest::READABLE) => match ready {
                Ok(ready) if !ready.is_read_closed() => {
                    // nothing to take from the socket: only forget this readiness
                    let _ = socket.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                }
                Ok(_) if !fin_is_gone && !matches!(socket.take_error(), Ok(Some(_))) => return,
                _ => {
                    let _ = gone.send(true);
                    return;
                }
            },
        }
    }
}
