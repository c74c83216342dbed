//! Where the bench's client and the servers it measures run. On this machine (a
//! Firecracker guest whose idle vCPUs halt at once, `guest_halt_poll_ns` = 0) a round
//! trip between two processes costs ~40 µs more when the answer has to wake another,
//! halted, vCPU than when both run on one CPU, and where the kernel puts a new process
//! differs from one start to the next. A figure that compares two servers, or a server
//! with a floor, therefore runs them on CPUs it chose (figure 9's floor in
//! `stdio_floor.rs`, figure 13's on/off, figure 10's calls); docs/benchmarks.md, figure
//! 9, has the measurements.

use std::process::Command;

use anyhow::{bail, Context, Result};
use rustix::process::Pid;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// The CPUs this thread may run on, in order (at least one).
pub(crate) fn allowed_cpus() -> Result<Vec<usize>> {
    let allowed = sched_getaffinity(None).context("cannot read the bench's CPU set")?;
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&c| allowed.is_set(c))
        .collect();
    if cpus.is_empty() {
        bail!("the bench may run on no CPU");
    }
    Ok(cpus)
}

/// This thread (the bench's client) pinned to one CPU until dropped, then back on the
/// CPUs it had.
pub(crate) struct ThreadPin {
    allowed: CpuSet,
}

impl ThreadPin {
    pub(crate) fn to(cpu: usize) -> Result<ThreadPin> {
        let allowed = sched_getaffinity(None).context("cannot read the bench's CPU set")?;
        let mut one = CpuSet::new();
        one.set(cpu);
        sched_setaffinity(None, &one)
            .with_context(|| format!("cannot pin the bench to CPU {cpu}"))?;
        Ok(ThreadPin { allowed })
    }
}

impl Drop for ThreadPin {
    fn drop(&mut self) {
        // Nothing to do on failure: the bench then goes on pinned, which only changes
        // where later figures run, and they do not depend on it.
        let _ = sched_setaffinity(None, &self.allowed);
    }
}

/// `program` run by `taskset -c CPU` (util-linux), so that the process and every thread it
/// starts run on `cpu` only, from its first instruction.
pub(crate) fn pinned(program: &std::ffi::OsStr, cpu: usize) -> Command {
    let mut command = Command::new("taskset");
    command.arg("-c").arg(cpu.to_string()).arg(program);
    command
}

/// Moves every thread process `pid` has now onto `cpu`; threads it starts later inherit
/// the CPU from the thread that starts them. For a server that is idle (between
/// requests) when it is moved.
pub(crate) fn pin_process(pid: u32, cpu: usize) -> Result<()> {
    let mut one = CpuSet::new();
    one.set(cpu);
    for tid in super::stdio::thread_ids(pid)? {
        let Some(thread) = i32::try_from(tid).ok().and_then(Pid::from_raw) else {
            continue;
        };
        sched_setaffinity(Some(thread), &one)
            .with_context(|| format!("cannot move thread {tid} of process {pid} to CPU {cpu}"))?;
    }
    Ok(())
}
