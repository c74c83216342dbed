//! grep's scan of a walk, a chunk at a time, on scanning threads that stay for the
//! whole call ([`Crew`]), and the merge of each chunk's hits in path order.
//!
//! The scan is a pipeline of two stages: while the helpers scan one chunk, the calling
//! thread lists the next; then it scans beside them what is left of the chunk, merges
//! it, and hands them the next. Listing on the calling thread between rounds left the
//! helpers idle for the listing's share of a call (~20 % of its instructions over
//! small files) on every chunk of a large root.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use regex::bytes::Regex;

use super::crew::{Crew, Dismiss};
use super::{Hits, Output, Scanned, Search, MAX_ENTRIES, MAX_WORKERS, RESULT_BUDGET};
use crate::registry::CallContext;

/// One chunk's work, shared by the scanning threads.
#[derive(Debug, Default)]
pub(super) struct Job {
    /// The chunk's files, the next ones in path order after those scanned before.
    files: Vec<String>,
    /// Each file's hits, set by the thread that scanned it.
    slots: Vec<OnceLock<Scanned>>,
    /// The number of files in all, once the listing is complete (for progress reports).
    total: Option<u64>,
    /// The next file to take.
    next: AtomicUsize,
    /// Entries and their least JSON bytes: the output's so far and the chunk's found.
    found_entries: AtomicUsize,
    found_bytes: AtomicUsize,
    /// Bytes read, or claimed for reading, against the scan budget.
    claimed: AtomicU64,
    /// A file did not fit the budget when a thread claimed it: no thread takes more.
    deferred: AtomicBool,
    /// Files scanned in the call so far, for progress reports.
    files_done: AtomicUsize,
}

impl Job {
    /// A thread's share of the chunk: it takes the next file from the shared counter,
    /// opens it, and reads and searches it if its size still fits the scan budget
    /// counted over the files read so far (a claim on a shared counter, so the threads
    /// together never read more than the budget); it puts its hits in that file's slot.
    /// It stops taking files when the call expires, when a file did not fit the
    /// budget, or when the output and the files finished so far already hold more than
    /// the output can take: every file the threads finished comes before any file not
    /// yet taken, so the merged output is full before it would reach the untaken ones.
    fn work(&self, search: &Search<'_>, ctx: &CallContext, regex: &Regex, buf: &mut Vec<u8>) {
        while !ctx.expired()
            && !self.deferred.load(Ordering::Relaxed)
            && self.found_entries.load(Ordering::Relaxed) <= MAX_ENTRIES
            && self.found_bytes.load(Ordering::Relaxed) <= RESULT_BUDGET
        {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(path) = self.files.get(index) else {
                break;
            };
            let scanned = search.file(regex, path, buf, |size| {
                let before = self.claimed.fetch_add(size, Ordering::Relaxed);
                if before.saturating_add(size) <= search.budget {
                    true
                } else {
                    self.claimed.fetch_sub(size, Ordering::Relaxed);
                    false
                }
            });
            if matches!(scanned.hits, Hits::Deferred) {
                self.deferred.store(true, Ordering::Relaxed);
            }
            let (entries, bytes) = scanned.hits.least_weight(path);
            self.found_entries.fetch_add(entries, Ordering::Relaxed);
            self.found_bytes.fetch_add(bytes, Ordering::Relaxed);
            let _ = self.slots[index].set(scanned);
            if ctx.wants_progress() {
                let done = self.files_done.fetch_add(1, Ordering::Relaxed) as u64 + 1;
                let total = self.total;
                ctx.report_progress(done, total, || {
                    Some(match total {
                        Some(total) => format!("grep: {done} of {total} files scanned"),
                        None => format!("grep: {done} files scanned"),
                    })
                });
            }
        }
    }
}

/// What each helper of the crew keeps from one chunk to the next: its own clone of the
/// regex (its own match cache instead of a shared pool) and its read buffer.
type Helper = (Regex, Vec<u8>);

/// Runs `body` with a scan whose scanning threads start at its first chunk and stay
/// until `body` returns.
pub(super) fn with_scan<R>(
    search: &Search<'_>,
    ctx: &CallContext,
    body: impl FnOnce(&mut Scan<'_, '_>) -> R,
) -> R {
    let crew = Crew::new(Job::default());
    let work = |(regex, buf): &mut Helper, job: &Job| job.work(search, ctx, regex, buf);
    std::thread::scope(|scope| {
        let _dismiss = Dismiss(&crew);
        let hire = |helpers: usize| {
            crew.hire(scope, helpers, || (search.regex.clone(), Vec::new()), &work);
        };
        let mut scan = Scan {
            search,
            ctx,
            crew: &crew,
            hire: Some(Box::new(hire)),
            own: (search.regex.clone(), Vec::new()),
            output: Output::default(),
            read: 0,
            over: false,
            in_flight: false,
        };
        body(&mut scan)
    })
}

/// A scan in path order over the listing, taken a chunk at a time as the walk goes: the
/// output and the bytes read so far carry from one chunk to the next, so the answer is
/// that of one scan over the whole listing.
pub(super) struct Scan<'s, 'a> {
    search: &'s Search<'a>,
    ctx: &'s CallContext,
    crew: &'s Crew<Job>,
    /// Starts the crew's helpers (given how many), at the first chunk.
    hire: Option<Box<dyn FnOnce(usize) + 's>>,
    /// The calling thread's regex and buffer: it scans beside the helpers.
    own: Helper,
    output: Output,
    /// Bytes read so far, counted against the scan budget.
    read: u64,
    /// The output is full, the budget spent or the call expired: no more files.
    over: bool,
    /// A round was started on the crew's job and not merged yet.
    in_flight: bool,
}

impl Scan<'_, '_> {
    /// Hands `files`, the next ones in path order after those handed before, to the
    /// scanning threads: first finishes and merges the chunk before (the calling thread
    /// scans what the helpers have not taken, then [`merge`] applies the budget exactly
    /// as a scan in path order would), then starts a round over `files` on the helpers
    /// (started at the first chunk, up to [`MAX_WORKERS`] threads with the calling one)
    /// and returns while they scan it, so the caller lists the next chunk meanwhile.
    /// `total` is the number of files in all, given with the last chunk once the listing
    /// is complete (for progress reports): that chunk is finished and merged before this
    /// returns. Leaves `files` empty, with room for the next chunk. False once no
    /// further file can change the output (known one chunk late, the one in flight
    /// being merged at the next call: the files listed meanwhile are dropped unscanned).
    pub(super) fn chunk(&mut self, files: &mut Vec<String>, total: Option<u64>) -> bool {
        self.settle();
        if self.over || files.is_empty() {
            files.clear();
            return !self.over;
        }
        if let Some(hire) = self.hire.take() {
            let threads = std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_WORKERS)
                .min(files.len())
                .max(1);
            hire(threads - 1);
        }
        {
            let mut job = self.crew.job_mut();
            // The job's files were cleared when merged: `files` gets their room.
            std::mem::swap(&mut job.files, files);
            let len = job.files.len();
            job.slots.clear();
            job.slots.resize_with(len, OnceLock::new);
            job.total = total;
            job.next = AtomicUsize::new(0);
            job.found_entries = AtomicUsize::new(self.output.entries.len());
            job.found_bytes = AtomicUsize::new(self.output.bytes);
            job.claimed = AtomicU64::new(self.read);
            job.deferred = AtomicBool::new(false);
        }
        self.crew.start();
        self.in_flight = true;
        if total.is_some() {
            self.settle();
        }
        !self.over
    }

    /// The output, once the chunk in flight is finished and merged.
    pub(super) fn finish(&mut self) -> Output {
        self.settle();
        std::mem::take(&mut self.output)
    }

    /// Finishes the round in flight, if any: the calling thread scans beside the
    /// helpers until the chunk is done, then merges its hits in path order.
    fn settle(&mut self) {
        if !std::mem::take(&mut self.in_flight) {
            return;
        }
        let (search, ctx) = (self.search, self.ctx);
        let (regex, buf) = &mut self.own;
        self.crew.finish(|job| job.work(search, ctx, regex, buf));
        let mut job = self.crew.job_mut();
        let job = &mut *job;
        let slots = std::mem::take(&mut job.slots);
        self.over = !merge(
            search,
            &job.files,
            slots,
            ctx,
            &mut self.output,
            &mut self.read,
        );
        job.files.clear();
    }
}

/// Merges the scanned files' hits in path order into `output`, counting each file's size
/// against the scan budget in `total`: a file too large to read is skipped (the output
/// is then incomplete), and the merge stops before the first file that would take the
/// total past the budget. Files the threads deferred or did not take are opened and
/// searched here, in order, unless the call has expired (then the output stops there,
/// incomplete). False when it stopped before the end of `files` (the output is then
/// `truncated`).
pub(super) fn merge(
    search: &Search<'_>,
    files: &[String],
    slots: Vec<OnceLock<Scanned>>,
    ctx: &CallContext,
    output: &mut Output,
    total: &mut u64,
) -> bool {
    let mut buf = Vec::new();
    for (path, slot) in files.iter().zip(slots) {
        let scanned = match slot.into_inner() {
            Some(scanned) if !matches!(scanned.hits, Hits::Deferred) => scanned,
            _ if ctx.expired() => {
                output.truncated = true;
                return false;
            }
            _ => search.file(&search.regex, path, &mut buf, |size| {
                total.saturating_add(size) <= search.budget
            }),
        };
        match scanned.hits {
            Hits::TooLarge => {
                output.truncated = true;
                continue;
            }
            Hits::Deferred => {
                output.truncated = true;
                return false;
            }
            _ if total.saturating_add(scanned.size) > search.budget => {
                output.truncated = true;
                return false;
            }
            _ => *total += scanned.size,
        }
        if !output.add(path, scanned.hits) {
            return false;
        }
    }
    true
}
