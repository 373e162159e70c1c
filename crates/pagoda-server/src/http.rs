//! The HTTP/1 connections: our own accept loop around hyper, so that every connection has
//! deadlines and their number a cap (`axum::serve` offers neither).
//!
//! One watchdog per connection (`Activity`) follows what the connection is doing and closes it
//! when the deadline of that state passes:
//! - waiting for a request's headers: `header_timeout`, counted from the accept for the first
//!   request and from the request's first byte for later ones;
//! - idle between requests (keep-alive): `keep_alive_timeout` from the end of the last response;
//! - handling a request: no read deadline, but the body must have arrived within
//!   `body_timeout` of the headers, else the request is answered 408 and the connection closed;
//! - in every state: when no byte could be written for `write_timeout` (the client stopped
//!   reading), the connection is closed, which drops the response stream and so aborts the
//!   request in the engine.
//!
//! hyper's own `header_read_timeout` is not used: it starts as soon as a connection goes idle,
//! so it would also cut keep-alive connections at the header timeout.
//!
//! What a client that stops reading holds is bounded: the kernel's socket buffers, hyper's
//! write buffer (about 400 KiB; hyper stops polling the response stream while it is full) and
//! the engine outputs queued for the request (the engine never waits for a client; a request
//! produces at most `max_tokens` tokens per choice); all of it is dropped `write_timeout` after
//! the last byte that could be written.
//!
//! Beyond `max_connections`, connections are not accepted: they wait in the kernel's accept
//! backlog (where they cost the server nothing) until a connection closes; their header
//! timeout starts when they are accepted.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, Request, Response};
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower_service::Service;

/// Deadlines and the connection cap of `pagoda serve`'s HTTP connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request's headers must have arrived this long after the connection was accepted
    /// (first request) or after the request's first byte (later requests).
    pub header_timeout: Duration,
    /// An idle connection between requests is closed after this long.
    pub keep_alive_timeout: Duration,
    /// A request body not fully arrived this long after its headers gets 408.
    pub body_timeout: Duration,
    /// A connection on which no byte could be written for this long is closed.
    pub write_timeout: Duration,
    /// Connections open at once; more wait in the kernel's accept backlog.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// The open connections, each a task, and the signal that asks them to finish.
pub(crate) struct Connections {
    router: Router,
    limits: HttpLimits,
    permits: Arc<Semaphore>,
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
}

impl Connections {
    pub(crate) fn new(router: Router, limits: HttpLimits) -> Connections {
        Connections {
            router,
            limits,
            permits: Arc::new(Semaphore::new(
                limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
            )),
            tasks: JoinSet::new(),
            stop: watch::Sender::new(false),
        }
    }

    /// Accepts and serves connections until `shutdown` resolves.
    pub(crate) async fn accept(
        &mut self,
        listener: &TcpListener,
        shutdown: impl Future<Output = ()>,
    ) {
        let mut shutdown = pin!(shutdown);
        loop {
            // A permit before the accept: beyond the cap, connections stay in the backlog.
            let permit = tokio::select! {
                biased;
                () = &mut shutdown => return,
                permit = self.permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
            };
            let (stream, peer) = tokio::select! {
                biased;
                () = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // The peer gave up before we got to it.
                    Err(error) if is_connection_error(&error) => continue,
                    Err(error) => {
                        // Out of file descriptors or memory: retrying at once would spin.
                        tracing::warn!(%error, "accept failed; retrying shortly");
                        tokio::select! {
                            biased;
                            () = &mut shutdown => return,
                            () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                        }
                    }
                },
            };
            while self.tasks.try_join_next().is_some() {}
            self.tasks.spawn(connection(
                stream,
                peer,
                self.router.clone(),
                self.limits,
                self.stop.subscribe(),
                permit,
            ));
        }
    }

    /// Asks every connection to finish its request in progress and close, and waits up to
    /// `timeout` for them; the connections still open after that are dropped, which aborts
    /// their requests.
    pub(crate) async fn drain(mut self, timeout: Duration) {
        self.stop.send_replace(true);
        let all_closed = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(timeout, all_closed).await.is_err() {
            tracing::warn!(
                ?timeout,
                connections = self.tasks.len(),
                "drain timeout passed; aborting the requests still running"
            );
            self.tasks.shutdown().await;
        }
    }
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection until it closes, its watchdog expires, or (after `stop`) its
/// request in progress is done.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    // Streamed tokens are small writes that should leave at once.
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = Exchanges {
        router,
        activity: activity.clone(),
        body_timeout: limits.body_timeout,
    };
    let conn = hyper::server::conn::http1::Builder::new()
        // Off: the watchdog does it (see the module's comment).
        .header_read_timeout(None)
        .serve_connection(io, service);
    let mut conn = pin!(conn);
    let mut stopping = *stop.borrow_and_update();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                return;
            }
            reason = activity.expired(&limits) => {
                // Dropping the connection closes the socket and drops any response stream.
                tracing::debug!(%peer, reason, "closing the connection");
                return;
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                // Closes it now if idle, else after the response in progress.
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// What a connection is doing, for its deadlines.
struct Activity {
    state: Mutex<State>,
    /// Whether `State::stalled_since` is set; lets every successful write skip the lock.
    stalled: AtomicBool,
    /// Woken when a deadline may have come earlier.
    changed: Notify,
}

struct State {
    phase: Phase,
    /// Requests handed to the router whose response has not been fully sent.
    exchanges: usize,
    /// Since when writes have made no progress.
    stalled_since: Option<Instant>,
}

#[derive(Clone, Copy)]
enum Phase {
    /// Waiting for a request's headers, since the accept or the request's first byte.
    Head(Instant),
    /// Between requests, since the end of the last response.
    Idle(Instant),
    /// A request is being handled.
    Busy,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Head(Instant::now()),
                exchanges: 0,
                stalled_since: None,
            }),
            stalled: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes arrived: on an idle connection, a new request has begun. (Bytes of a pipelined
    /// request read while the previous one is handled leave the connection idle after it, so
    /// such a request's headers may take up to the keep-alive plus the header timeout.)
    fn read_some(&self) {
        let mut state = self.lock();
        if let Phase::Idle(_) = state.phase {
            state.phase = Phase::Head(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }

    fn wrote(&self, poll: &Poll<io::Result<usize>>) {
        match poll {
            Poll::Pending => {
                if !self.stalled.swap(true, Ordering::Relaxed) {
                    self.lock().stalled_since = Some(Instant::now());
                    self.changed.notify_one();
                }
            }
            Poll::Ready(Ok(n)) if *n > 0 => {
                if self.stalled.swap(false, Ordering::Relaxed) {
                    self.lock().stalled_since = None;
                }
            }
            Poll::Ready(_) => {}
        }
    }

    fn begin_exchange(self: &Arc<Self>) -> ExchangeGuard {
        let mut state = self.lock();
        state.exchanges += 1;
        state.phase = Phase::Busy;
        ExchangeGuard(self.clone())
    }

    fn end_exchange(&self) {
        let mut state = self.lock();
        state.exchanges = state.exchanges.saturating_sub(1);
        if state.exchanges == 0 {
            state.phase = Phase::Idle(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }

    /// The earliest deadline of the current state, and what it is; `None`: none.
    fn deadline(&self, limits: &HttpLimits) -> Option<(Instant, &'static str)> {
        let state = self.lock();
        let read = match state.phase {
            Phase::Head(since) => since
                .checked_add(limits.header_timeout)
                .map(|at| (at, "no complete request headers within the header timeout")),
            Phase::Idle(since) => since
                .checked_add(limits.keep_alive_timeout)
                .map(|at| (at, "idle for the keep-alive timeout")),
            Phase::Busy => None,
        };
        let write = state.stalled_since.and_then(|since| {
            since
                .checked_add(limits.write_timeout)
                .map(|at| (at, "no byte could be written within the write timeout"))
        });
        match (read, write) {
            (Some(read), Some(write)) => Some(if write.0 < read.0 { write } else { read }),
            (read, write) => read.or(write),
        }
    }

    /// Resolves when the deadline of the connection's current state has passed.
    async fn expired(&self, limits: &HttpLimits) -> &'static str {
        loop {
            // A state change stores a `notify_one` permit, so none is missed between the
            // deadline's computation and the wait.
            match self.deadline(limits) {
                Some((at, reason)) if at <= Instant::now() => return reason,
                Some((at, _)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }
}

/// One request being handled; dropped with its response body (or with the request, if the
/// connection goes first).
struct ExchangeGuard(Arc<Activity>);

impl Drop for ExchangeGuard {
    fn drop(&mut self) {
        self.0.end_exchange();
    }
}

/// The socket, telling the watchdog about reads and stalled writes.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read_some();
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.activity.wrote(&poll);
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.activity.wrote(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The router as hyper's service, with the body timeout and the exchange bookkeeping.
#[derive(Clone)]
struct Exchanges {
    router: Router,
    activity: Arc<Activity>,
    body_timeout: Duration,
}

type ExchangeFuture = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Exchanges {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = ExchangeFuture;

    fn call(&self, request: Request<Incoming>) -> ExchangeFuture {
        let exchange = self.activity.begin_exchange();
        let (parts, body) = request.into_parts();
        let arrived = Arc::new(AtomicBool::new(body.is_end_stream()));
        let body = Timed {
            inner: body,
            arrived: arrived.clone(),
        };
        // axum's router is always ready; `call` needs no `poll_ready` first.
        let handled = self.router.clone().call(Request::from_parts(parts, body));
        let body_timeout = self.body_timeout;
        Box::pin(async move {
            let stalled = async {
                tokio::time::sleep(body_timeout).await;
                if arrived.load(Ordering::Acquire) {
                    // The body came in time; the handler may take as long as it needs.
                    std::future::pending::<()>().await;
                }
            };
            let response = tokio::select! {
                response = handled => match response {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
                // Drops the handler, and with it the half-read body.
                () = stalled => body_timed_out(),
            };
            Ok(response.map(|body| Tracked {
                body,
                _exchange: exchange,
            }))
        })
    }
}

/// 408 in OpenAI's error format; the connection is closed after it.
fn body_timed_out() -> Response<Body> {
    let mut response = crate::error::ApiError::BodyTimeout.into_response();
    // The rest of the body may still be on its way: this connection cannot carry another request.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request body that records when it has fully arrived.
struct Timed {
    inner: Incoming,
    arrived: Arc<AtomicBool>,
}

impl HttpBody for Timed {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.inner).poll_frame(cx);
        let done = match &frame {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            _ => false,
        };
        if done {
            this.arrived.store(true, Ordering::Release);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that ends its exchange when hyper is done with it.
struct Tracked {
    body: Body,
    _exchange: ExchangeGuard,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
