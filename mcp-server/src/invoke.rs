//! Handler running: each invocation's handler spawned as its own task with panics caught, and the
//! calls a running handler makes back into the server (progress, sleep, asking the client,
//! logging) through its [`RequestContext`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{AbortHandle, Abortable};
use futures_util::FutureExt;
use serde_json::Value;

use mcp_proto::{CallId, HandlerError, Invocation, LogLevel, Reply, Request};

use crate::driver::State;
use crate::handler::{
    BoxFuture, Complete, GetPrompt, Handler, HandlerKind, ReadResource, RequestContext, ToolCall,
};
use crate::panics;
use crate::runtime::{sleep_until, Runtime};
use crate::server::Server;

impl Server {
    pub(crate) fn progress(
        &self,
        call: CallId,
        progress: serde_json::Number,
        total: Option<serde_json::Number>,
        message: Option<&str>,
    ) -> Result<mcp_proto::ProgressOutcome, mcp_proto::Stale> {
        let mut st = self.lock();
        let now = self.now();
        let outcome = st.engine.progress(now, call, progress, total, message);
        self.release(st);
        outcome
    }

    pub(crate) fn sleep(&self, duration: Duration) -> BoxFuture<()> {
        match self.shared.rt.get() {
            Some(rt) => sleep_until(rt.as_ref(), rt.now().checked_add(duration)),
            None => Box::pin(std::future::ready(())),
        }
    }

    pub(crate) fn can_ask(&self, call: CallId, request: &mcp_proto::interaction::InputRequest) -> bool {
        self.lock().engine.can_ask(call, request).is_ok()
    }

    pub(crate) async fn ask(
        &self,
        call: CallId,
        requests: Vec<(String, mcp_proto::interaction::InputRequest)>,
    ) -> Result<serde_json::Map<String, Value>, mcp_proto::AskError> {
        let rx = {
            let mut st = self.lock();
            let now = self.now();
            let asked = st.engine.ask(now, call, requests);
            let rx = match asked {
                Ok(mcp_proto::Asked::Pending) => {
                    let (tx, rx) = async_channel::bounded(1);
                    st.asks.insert(call, tx);
                    Ok(rx)
                }
                Ok(mcp_proto::Asked::Answered(answers)) => Err(Ok(answers)),
                Err(e) => Err(Err(e)),
            };
            self.release(st);
            rx
        };
        match rx {
            // The sender goes when the call ends without answers (cancelled, timed out).
            Ok(rx) => rx.recv().await.unwrap_or(Err(mcp_proto::AskError::Stale)),
            Err(done) => done,
        }
    }

    pub(crate) fn log(&self, call: CallId, level: LogLevel, logger: Option<&str>, data: Value) {
        let mut st = self.lock();
        if !st.engine.config().logging {
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| {
                tracing::warn!(
                    "RequestContext::log called, but this server does not log to clients; \
                     enable it with ServerBuilder::logging()"
                )
            });
        }
        let now = self.now();
        // Stale: the call ended; a late log line has nowhere to go.
        let _ = st.engine.log(now, call, level, logger, data);
        self.release(st);
    }

    /// Spawns an invocation's handler as its own task, abortable through `st.tasks`; its
    /// completion comes back to the driver as a command.
    pub(crate) fn spawn_handler(&self, st: &mut State, rt: &dyn Runtime, inv: Invocation<Handler>) {
        let call = inv.ticket.call();
        let id = st.engine.request_id(call);
        let session = st.engine.session_of(inv.conn);
        let span = st.traces.request_started(call, id, session, &inv, || rt.now());
        let (ticket, fut) = self.run(inv);
        let fut = match span {
            Some(span) => Box::pin(tracing::Instrument::instrument(fut, span)),
            None => fut,
        };
        let (handle, registration) = AbortHandle::new_pair();
        st.tasks.insert(call, handle);
        let server = self.clone();
        let task = Abortable::new(
            async move {
                let reply = fut.await;
                server.submit(Box::new(move |_: &Server, st: &mut State, now: Instant| {
                    st.tasks.remove(&call);
                    // Stale: cancelled meanwhile, nothing to send.
                    let answered = st.engine.complete(now, ticket, reply);
                    st.traces.request_answered(call, answered, now);
                }));
            },
            registration,
        );
        rt.spawn(Box::pin(task.map(|_| ())));
    }

    /// Prepares an invocation's handler. Nothing of the handler runs here: the future starts it
    /// when first polled, on its own task, and catches panics so one bad handler cannot take the
    /// connection down; private failures are logged, never shown to the peer.
    pub(crate) fn run(&self, inv: Invocation<Handler>) -> (mcp_proto::Ticket, BoxFuture<Reply>) {
        let Invocation { ticket, caller, version, request, handler, client_extensions, .. } = inv;
        let ctx = RequestContext {
            caller,
            version,
            call: Some(ticket.call()),
            server: self.clone(),
            client_extensions: Arc::new(client_extensions),
            progress_told: Arc::default(),
            elicits: Default::default(),
        };
        let fut: BoxFuture<Reply> = match (handler.0, request) {
            (HandlerKind::Tool(f), Request::CallTool { name, arguments }) => {
                let what = format!("tool {name}");
                guarded(what, move || f(ToolCall { name, arguments, ctx }), Reply::Tool)
            }
            (HandlerKind::Resource(f), Request::ReadResource { uri, template, variables }) => {
                let what = format!("resource {uri}");
                guarded(what, move || f(ReadResource { uri, template, variables, ctx }), Reply::Resource)
            }
            (HandlerKind::Prompt(f), Request::GetPrompt { name, arguments }) => {
                let what = format!("prompt {name}");
                guarded(what, move || f(GetPrompt { name, arguments, ctx }), Reply::Prompt)
            }
            (HandlerKind::Completion(f), Request::Complete { reference, argument, value, context }) => {
                let what = format!("completion of {argument}");
                let req = Complete { reference, argument, value, context, ctx };
                guarded(what, move || f(req), Reply::Completion)
            }
            (HandlerKind::TaskStore(store), Request::GetTask { task_id }) => {
                let owner = ctx.caller.binding().to_owned();
                guarded(
                    format!("task store lookup of {task_id}"),
                    move || store.get(owner, task_id),
                    Reply::Task,
                )
            }
            // The engine pairs each request with the handler registered for it; anything else is
            // answered with the generic internal error.
            _ => Box::pin(std::future::ready(Reply::Tool(Err(HandlerError::Panicked)))),
        };
        (ticket, fut)
    }
}

/// Runs a handler with panics caught and private failures logged.
pub(crate) fn guarded<T: Send + 'static>(
    what: String,
    start: impl FnOnce() -> BoxFuture<Result<T, HandlerError>> + Send + 'static,
    wrap: fn(Result<T, HandlerError>) -> Reply,
) -> BoxFuture<Reply> {
    Box::pin(async move {
        // Called here, on the handler's task: even the synchronous part of a handler never
        // runs on the driver. Every poll is watched, so that a panic leaves its stack.
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| panics::watched(start)));
        let result = match started {
            Ok(mut fut) => {
                let watched = std::future::poll_fn(move |cx| panics::watched(|| fut.as_mut().poll(cx)));
                AssertUnwindSafe(watched).catch_unwind().await
            }
            Err(panic) => Err(panic),
        };
        let result = result.unwrap_or_else(|panic| {
            let backtrace = panics::take_backtrace();
            tracing::error!(
                handler = what,
                panic = %panics::scrub(panic_text(&*panic)),
                backtrace = backtrace.as_ref().map(tracing::field::display),
                "handler panicked"
            );
            Err(HandlerError::Panicked)
        });
        match &result {
            Err(HandlerError::Private(e)) => {
                // The detail stays in the server's log; the peer gets the generic error.
                tracing::error!(handler = what, error = %e, "handler failed");
            }
            Err(HandlerError::Failure(f)) => {
                // A typed failure is the tool's answer, not the server's fault; its cause, if
                // any, is the part the peer never sees.
                match f.cause() {
                    Some(cause) => {
                        tracing::warn!(handler = what, code = f.code, cause = %cause, "tool failed")
                    }
                    None => tracing::debug!(handler = what, code = f.code, "tool failed"),
                }
            }
            _ => {}
        }
        wrap(result)
    })
}

pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)")
}
