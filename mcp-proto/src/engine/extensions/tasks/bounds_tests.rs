//! The task table's shares and byte bounds (issue 23: one caller took the whole table with
//! running tasks, and ended tasks' results had no byte bound). Each test fails on the table as
//! it was: running tasks never made room, and any result was kept whole.

use std::time::Instant;

use serde_json::{json, Value};

use super::TaskRecord;
use crate::caller::Caller;
use crate::content::ToolOutput;
use crate::cursor::KeyRing;
use crate::engine::{
    CancelReason, Config, ConnId, ConnKind, Engine, Implementation, Invocation, Output, Reply, Seed,
};
use crate::limits::Limits;
use crate::registry::{TaskSupport, Tool};

struct Rig {
    engine: Engine<u32>,
    now: Instant,
    /// Ended-task records drained but not yet looked at.
    ended: Vec<TaskRecord>,
}

impl Rig {
    fn new(limits: impl FnOnce(&mut Limits)) -> Self {
        let mut config = Config::new(Implementation::new("t", "1"), KeyRing::new([3; 32]));
        config.seed = Some(Seed([5; 32]));
        limits(&mut config.limits);
        #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
        let now = Instant::now();
        let mut engine = Engine::new(config, now);
        let job = Tool::new("job", "A task", json!({"type": "object"})).task_support(TaskSupport::Optional);
        engine.registry_mut(now).add_tool(job, 1).unwrap();
        Self { engine, now, ended: Vec::new() }
    }

    fn caller(&mut self, name: &str) -> ConnId {
        self.engine.open(self.now, ConnKind::Stdio, Caller::identified(name)).unwrap()
    }

    /// Starts a task on `conn`: its id and its handler's invocation, or the error.
    fn start(&mut self, conn: ConnId, id: u32) -> Result<(String, Invocation<u32>), Value> {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "job",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {super::TASKS_EXTENSION: {}}}}}});
        self.engine.handle_frame(self.now, conn, frame.to_string().as_bytes());
        let mut reply = Value::Null;
        let mut inv = None;
        for o in self.drain() {
            match o {
                Output::Invoke(i) => inv = Some(i),
                Output::Frame { bytes, .. } if reply.is_null() => {
                    reply = serde_json::from_slice(&bytes).unwrap_or_default();
                }
                _ => {}
            }
        }
        match (reply.pointer("/result/taskId").and_then(Value::as_str), inv) {
            (Some(task), Some(inv)) => Ok((task.to_owned(), inv)),
            _ => Err(reply),
        }
    }

    /// The outputs waiting, but for the ended-task records, set aside for [`Rig::ended`].
    fn drain(&mut self) -> Vec<Output<u32>> {
        let mut rest = Vec::new();
        while let Some(o) = self.engine.poll_output() {
            match o {
                Output::TaskEnded(r) => self.ended.push(r),
                o => rest.push(o),
            }
        }
        rest
    }

    /// The records of the tasks that ended since the last call, in order.
    fn ended(&mut self) -> Vec<TaskRecord> {
        self.drain();
        std::mem::take(&mut self.ended)
    }

    /// Ends a task with a text result of `bytes` characters; the record handed to the store.
    fn finish(&mut self, inv: Invocation<u32>, bytes: usize) -> TaskRecord {
        let out = Reply::Tool(Ok(ToolOutput::text("x".repeat(bytes))));
        self.engine.complete(self.now, inv.ticket, out).unwrap();
        let records = self.ended();
        assert_eq!(records.len(), 1, "one record per ended task");
        records.into_iter().next().unwrap()
    }

    /// Whether the engine still holds task `id` (whoever owns it).
    fn holds(&self, id: &str) -> bool {
        self.engine.holds_task(id)
    }
}

fn cancelled(outs: &[Output<u32>]) -> Vec<CancelReason> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Cancel { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

#[test]
fn a_caller_below_its_share_gets_a_place_from_a_flood_of_running_tasks() {
    let mut rig = Rig::new(|l| {
        l.max_tasks(8);
    });
    let (mallory, alice) = (rig.caller("mallory"), rig.caller("alice"));
    let mut flood = Vec::new();
    for id in 0..8 {
        flood.push(rig.start(mallory, id).expect("room while the table has some"));
    }
    // Mallory alone holds the whole table: at her share, she is refused.
    let err = rig.start(mallory, 100).map(|_| ()).unwrap_err();
    assert_eq!(err["error"]["code"], -32600, "{err}");
    // Alice, below her share, gets a place: mallory's newest running task is cancelled for it.
    let (task, inv) = match rig.start(alice, 1) {
        Ok(started) => started,
        Err(reply) => panic!("alice was refused: {reply}"),
    };
    let newest = &flood[7].0;
    assert!(!rig.holds(newest), "mallory's newest task made room");
    assert!(flood[..7].iter().all(|(t, _)| rig.holds(t)), "and only that one");
    assert!(rig.holds(&task));
    let displaced = rig.ended();
    assert_eq!(displaced.len(), 1);
    assert_eq!(displaced[0].task["status"], "cancelled");
    assert_eq!(displaced[0].task["statusMessage"], super::DISPLACED_MESSAGE);
    assert_eq!(rig.engine.status().refusals.displaced, 1);
    // Shares now 4 each: mallory (7) keeps giving way to alice up to alice's share, then
    // alice is refused too, and none of alice's tasks is ever taken.
    let mut alice_tasks = vec![task];
    for id in 2..=4 {
        let (task, _) = rig.start(alice, id).unwrap_or_else(|r| panic!("alice below share: {r}"));
        alice_tasks.push(task);
    }
    let err = rig.start(alice, 5).map(|_| ()).unwrap_err();
    assert_eq!(err["error"]["code"], -32600, "alice at her share of 4: {err}");
    let err = rig.start(mallory, 101).map(|_| ()).unwrap_err();
    assert_eq!(err["error"]["code"], -32600, "mallory at hers: {err}");
    assert!(alice_tasks.iter().all(|t| rig.holds(t)));
    assert_eq!(rig.engine.task_count(), 8);
    drop(inv);
}

#[test]
fn displacing_a_running_task_tells_its_handler_to_stop() {
    let mut rig = Rig::new(|l| {
        l.max_tasks(2);
    });
    let (mallory, alice) = (rig.caller("mallory"), rig.caller("alice"));
    let (_, _older) = rig.start(mallory, 0).unwrap();
    let (_, inv) = rig.start(mallory, 1).unwrap();
    let frame = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "job",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {super::TASKS_EXTENSION: {}}}}}});
    rig.engine.handle_frame(rig.now, alice, frame.to_string().as_bytes());
    let outs = rig.drain();
    assert_eq!(cancelled(&outs), [CancelReason::Displaced]);
    assert_eq!(CancelReason::Displaced.as_str(), "displaced");
    // The late answer of the stopped handler is stale, never a second outcome.
    assert!(rig.engine.complete(rig.now, inv.ticket, Reply::Tool(Ok(ToolOutput::text("late")))).is_err());
}

#[test]
fn a_result_past_the_per_task_bound_ends_the_task_failed_and_no_record_is_larger() {
    let mut rig = Rig::new(|l| {
        l.max_task_result_bytes(2000);
    });
    let alice = rig.caller("alice");
    let (_, inv) = rig.start(alice, 1).unwrap();
    let small = rig.finish(inv, 500);
    assert_eq!(small.task["status"], "completed");
    let (_, inv) = rig.start(alice, 2).unwrap();
    let large = rig.finish(inv, 5000);
    assert_eq!(large.task["status"], "failed", "{:?}", large.task);
    let error = &large.task["error"];
    assert_eq!(error["code"], -32603);
    assert_eq!(error["data"]["reason"], "result_too_large");
    assert_eq!(error["data"]["limit"], 2000);
    assert!(error["data"]["bytes"].as_u64().unwrap() > 5000);
    for record in [&small, &large] {
        let size = serde_json::to_vec(&record.task).unwrap().len();
        assert!(size <= 2000, "a record of {size} bytes");
    }
    // The size the engine counted is the record's JSON, byte for byte.
    let t = rig.engine.tasks.by_serial.values().find(|t| t.id == small.task_id).unwrap();
    assert_eq!(t.bytes, serde_json::to_vec(&small.task).unwrap().len());
}

#[test]
fn ended_tasks_share_the_byte_bound_and_a_caller_over_its_share_forgets_its_own_first() {
    // 8 KiB of ended tasks; each result here is about 1.3 KiB of JSON.
    let mut rig = Rig::new(|l| {
        l.max_ended_task_bytes(8 * 1024);
    });
    let (mallory, alice) = (rig.caller("mallory"), rig.caller("alice"));
    let mut flood = Vec::new();
    for id in 0..12 {
        let (task, inv) = rig.start(mallory, id).unwrap();
        rig.finish(inv, 1000);
        flood.push(task);
    }
    let kept: Vec<&String> = flood.iter().filter(|t| rig.holds(t)).collect();
    assert!(kept.len() < 12 && !kept.is_empty(), "kept {}", kept.len());
    assert!(rig.engine.tasks.bytes <= 8 * 1024, "{} bytes held", rig.engine.tasks.bytes);
    assert!(rig.holds(flood.last().unwrap()), "the newest is kept, the oldest forgotten");
    assert!(!rig.holds(&flood[0]));
    // Alice's tasks end within her share: mallory's oldest make room, never alice's.
    let mut mine = Vec::new();
    for id in 0..3 {
        let (task, inv) = rig.start(alice, id).unwrap();
        let record = rig.finish(inv, 1000);
        assert_eq!(record.task["status"], "completed");
        mine.push(task);
    }
    assert!(mine.iter().all(|t| rig.holds(t)), "alice's tasks are kept");
    assert!(rig.engine.tasks.bytes <= 8 * 1024);
    // Mallory flooding on forgets her own, never alice's.
    for id in 100..110 {
        let (_, inv) = rig.start(mallory, id).unwrap();
        rig.finish(inv, 1000);
    }
    assert!(mine.iter().all(|t| rig.holds(t)), "a flood never takes alice's tasks");
    // A result past the caller's whole share, with nobody else past theirs, is not kept whole.
    let (_, inv) = rig.start(alice, 50).unwrap();
    let huge = rig.finish(inv, 6000);
    assert_eq!(huge.task["status"], "failed", "{:?}", huge.task);
    assert_eq!(huge.task["error"]["data"]["reason"], "result_too_large");
}
