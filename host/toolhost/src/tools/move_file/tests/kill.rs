//! kill -9 in the middle of moves and writes on osfs, in a child process: no file is
//! lost, and the next open recovers what the killed process left.

use super::*;

/// Where [`kill_child`] works: set only in the child process [`kill_9_loses_no_file`]
/// spawns.
const KILL_CHILD_ROOT: &str = "TOOLHOST_TEST_KILL_CHILD_ROOT";

/// Set in the child when its case-only renames must go through a staging directory.
const KILL_CHILD_STAGING: &str = "TOOLHOST_TEST_KILL_CHILD_STAGING";

/// What [`kill_child`] prints once it starts renaming.
const READY: &str = "kill-child-ready";

/// The file the kill loop renames back and forth, and its content.
const KILLED_CONTENT: &[u8] = b"# the content must survive kill -9\n";

/// The child of [`kill_9_loses_no_file`]: over the OsStorage root it is given, renames
/// `d/Readme.md` to `d/README.md` and back with move_file (case-only renames) and
/// rewrites `w.md` with write_file, until it is killed. Does nothing when run directly.
#[test]
#[ignore = "the child process of kill_9_loses_no_file, which runs it itself"]
fn kill_child() {
    let Some(root) = std::env::var_os(KILL_CHILD_ROOT) else {
        return;
    };
    let storage = Arc::new(crate::vfs::OsStorage::open(&root).expect("open root"));
    // Half the rounds take the path of a case-insensitive disk: through a staging directory.
    if std::env::var_os(KILL_CHILD_STAGING).is_some() {
        storage.force_case_staging(true);
    }
    let registry = Registry::new();
    register_vfs_tools(
        &registry,
        VfsToolOptions::new(Arc::clone(&storage) as Arc<dyn Storage>),
    )
    .expect("register");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (mut from, mut to) = ("d/Readme.md", "d/README.md");
    if storage.exists(to).expect("exists") {
        std::mem::swap(&mut from, &mut to);
    }
    // libtest prints the test's name on the same line first.
    println!("{READY}");
    std::io::Write::flush(&mut std::io::stdout()).expect("flush");
    for round in 0u64.. {
        runtime.block_on(async {
            call(&registry, json!({"source": from, "destination": to}))
                .await
                .expect("case-only move");
            let version = format!("version {}\n", round % 10);
            call_tool(
                &registry,
                "write_file",
                json!({"path": "w.md", "content": version}),
            )
            .await
            .expect("write");
        });
        std::mem::swap(&mut from, &mut to);
    }
}

async fn call_tool(registry: &Registry, tool: &str, args: Value) -> Result<Value, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, args.to_string()),
            &crate::registry::Environment::default(),
        )
        .await
        .map(|result| result.content)
}

/// Every name under `dir`, recursively, as paths relative to it.
fn names_on_disk(dir: &std::path::Path, prefix: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().expect("type").is_dir() {
            names_on_disk(&entry.path(), &format!("{name}/"), out);
        }
        out.push(name);
    }
}

/// No file lost to a crash: a process killed with SIGKILL at a random moment of case-only
/// move_file calls (and write_file calls) loses no file: after each kill, reopening the
/// store leaves the content under exactly one of the two names, byte for byte, and no
/// temporary or staging file anywhere on disk.
#[cfg(unix)]
#[test]
fn kill_9_loses_no_file() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::create_dir(root.join("d")).expect("mkdir");
    std::fs::write(root.join("d/Readme.md"), KILLED_CONTENT).expect("seed");
    let exe = std::env::current_exe().expect("test binary");
    // A small xorshift, seeded from the clock: the kill lands at a different moment each
    // round, and a failure prints the seed.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let started = Instant::now();
    let mut rounds = 0;
    let (mut left_temporary, mut left_staged, mut only_staged) = (0, 0, 0);
    while rounds < 150 && started.elapsed() < Duration::from_secs(20) {
        rounds += 1;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut command = Command::new(&exe);
        if rounds % 2 == 0 {
            command.env(KILL_CHILD_STAGING, "1");
        }
        let mut child = command
            .args([
                "--exact",
                "tools::move_file::tests::kill::kill_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(KILL_CHILD_ROOT, root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the child");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        loop {
            line.clear();
            let read = stdout
                .read_line(&mut line)
                .expect("read the child's output");
            assert!(
                read > 0,
                "round {rounds}: the child ended before it was ready"
            );
            if line.trim_end().ends_with(READY) {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(seed % 20_000));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");

        // What the killed process left, before the reopen cleans it up.
        let mut before = Vec::new();
        names_on_disk(root, "", &mut before);
        if before.iter().any(|name| name.contains(".tmp-")) {
            left_temporary += 1;
        }
        if before.iter().any(|name| name.contains(".stage-")) {
            left_staged += 1;
            if !before
                .iter()
                .any(|name| name == "d/Readme.md" || name == "d/README.md")
            {
                only_staged += 1;
            }
        }
        // Reopening the store recovers or removes what the killed process left.
        let storage = crate::vfs::OsStorage::open(root).expect("reopen");
        let listed: Vec<String> = storage
            .list()
            .expect("list")
            .into_iter()
            .map(|entry| entry.path)
            .collect();
        let kept: Vec<&String> = listed.iter().filter(|p| p.starts_with("d/")).collect();
        assert_eq!(
            kept.len(),
            1,
            "round {rounds} (seed {seed}): the file is under {kept:?}, listed {listed:?}"
        );
        assert!(
            *kept[0] == "d/Readme.md" || *kept[0] == "d/README.md",
            "{kept:?}"
        );
        assert_eq!(
            storage.read(kept[0]).expect("read").content,
            KILLED_CONTENT,
            "round {rounds}"
        );
        let mut on_disk = Vec::new();
        names_on_disk(root, "", &mut on_disk);
        on_disk.sort();
        let mut want = vec!["d".to_owned(), kept[0].clone()];
        if on_disk.iter().any(|name| name == "w.md") {
            let written = std::fs::read_to_string(root.join("w.md")).expect("w.md");
            assert!(
                written.starts_with("version ") && written.len() == 10,
                "round {rounds}: w.md holds {written:?}"
            );
            want.push("w.md".to_owned());
        }
        want.sort();
        assert_eq!(on_disk, want, "round {rounds} (seed {seed}): left on disk");
    }
    println!(
        "{rounds} rounds in {:?}; the kill left a temporary file in {left_temporary}, a staging directory in {left_staged} (the file only there in {only_staged})",
        started.elapsed()
    );
    assert!(rounds >= 30, "only {rounds} rounds ran in 20 s");
    // Else no kill landed mid-write or mid-rename, and the loop proved nothing.
    assert!(
        left_temporary > 0 && left_staged > 0,
        "no kill left a temporary file ({left_temporary}) or a staging directory ({left_staged})"
    );
}
