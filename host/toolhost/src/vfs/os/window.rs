//! A window of one directory's entries for the walk: their sort keys (the name, with a
//! `/` after a directory's), the smallest ones past a cursor, in byte order, within a
//! budget of bytes.
//!
//! The keys are held back to back in one string, each by its span: about 8 bytes per
//! entry besides its name, where a `DirEntry` and a `String` each would be ~130. A
//! directory whose keys do not fit the budget is read again for the next window, past
//! the last key of this one, so what one directory costs at once is the budget however
//! many entries it holds (a directory of a million entries is read a few times over,
//! never held whole).

use std::cmp::Ordering;

/// What one entry costs a window besides the bytes of its key: its span.
const ENTRY_COST: usize = std::mem::size_of::<(u32, u32)>();

/// Sort keys of a directory's entries, the smallest past a cursor.
#[derive(Debug)]
pub(super) struct Window {
    /// The keys, back to back.
    keys: String,
    /// Each key's start and end in `keys`.
    spans: Vec<(u32, u32)>,
    /// The most bytes (keys and spans) this window keeps; it keeps one key whatever its
    /// size.
    budget: usize,
    /// Keys were left out for the budget: the directory holds more past the last key.
    more: bool,
}

impl Window {
    /// An empty window that keeps at most `budget` bytes of keys.
    pub(super) fn new(budget: usize) -> Self {
        Window {
            keys: String::new(),
            spans: Vec::new(),
            budget,
            more: false,
        }
    }

    /// What the window holds, in bytes: its keys and their spans.
    pub(super) fn bytes(&self) -> usize {
        self.keys.len() + self.spans.len() * ENTRY_COST
    }

    /// Adds the key `name` (with a `/` after it when `dir`). Past twice the budget, the
    /// window drops its largest keys down to the budget (so adding is amortized
    /// `O(log n)` per key and the window never holds more than twice the budget).
    pub(super) fn push(&mut self, name: &str, dir: bool) {
        let start = self.keys.len();
        self.keys.push_str(name);
        if dir {
            self.keys.push('/');
        }
        // A key is at most a name of 255 bytes and a `/`; the keys of a window fit in
        // 2 x budget plus one key, far below 4 GiB.
        self.spans.push((start as u32, self.keys.len() as u32));
        if self.bytes() > self.budget.saturating_mul(2) {
            self.cut();
        }
    }

    /// Sorts the keys and keeps the smallest that fit the budget (at least one).
    fn cut(&mut self) {
        self.sort();
        let mut used = 0;
        let mut keep = 0;
        for &(start, end) in &self.spans {
            let cost = (end - start) as usize + ENTRY_COST;
            if keep > 0 && used + cost > self.budget {
                break;
            }
            used += cost;
            keep += 1;
        }
        if keep == self.spans.len() {
            return;
        }
        self.more = true;
        let mut keys = String::with_capacity(used);
        let mut spans = Vec::with_capacity(keep);
        for &(start, end) in &self.spans[..keep] {
            let at = keys.len() as u32;
            keys.push_str(&self.keys[start as usize..end as usize]);
            spans.push((at, keys.len() as u32));
        }
        self.keys = keys;
        self.spans = spans;
    }

    fn sort(&mut self) {
        let keys = &self.keys;
        self.spans.sort_unstable_by(|a, b| {
            keys[a.0 as usize..a.1 as usize].cmp(&keys[b.0 as usize..b.1 as usize])
        });
    }

    /// The window's keys in byte order, within its budget; and whether the directory
    /// holds more past the last of them (read it again after it).
    pub(super) fn finish(mut self) -> Finished {
        self.cut();
        Finished {
            more: self.more,
            window: self,
        }
    }
}

/// A window whose keys are sorted and within its budget.
#[derive(Debug)]
pub(super) struct Finished {
    window: Window,
    /// The directory holds keys past the last of these.
    pub(super) more: bool,
}

impl Finished {
    /// The keys in byte order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        let keys = &self.window.keys;
        self.window
            .spans
            .iter()
            .map(move |&(start, end)| &keys[start as usize..end as usize])
    }

    /// What the window holds, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.window.bytes()
    }
}

/// Whether the key of `name` (with a `/` after it when `dir`) sorts after `cursor`,
/// without making the key.
pub(super) fn after(name: &str, dir: bool, cursor: &str) -> bool {
    let (name, cursor) = (name.as_bytes(), cursor.as_bytes());
    let common = name.len().min(cursor.len());
    match name[..common].cmp(&cursor[..common]) {
        Ordering::Greater => true,
        Ordering::Less => false,
        // The name is a prefix of the cursor or the other way round: the longer key
        // is the greater.
        Ordering::Equal => match name.len().cmp(&cursor.len()) {
            Ordering::Greater => true,
            // The key is the name plus `/`: it sorts after the cursor if the cursor
            // goes on with a byte smaller than `/` (or is the name alone).
            Ordering::Less => dir && cursor[common] < b'/',
            Ordering::Equal => dir,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(window: &Finished) -> Vec<&str> {
        window.keys().collect()
    }

    #[test]
    fn a_window_sorts_its_keys_with_a_slash_after_directories() {
        let mut window = Window::new(1 << 20);
        for (name, dir) in [("a0", false), ("a", true), ("a.md", false), ("a-b", false)] {
            window.push(name, dir);
        }
        let window = window.finish();
        assert_eq!(keys(&window), ["a-b", "a.md", "a/", "a0"]);
        assert!(!window.more);
    }

    #[test]
    fn a_window_keeps_the_smallest_keys_that_fit_its_budget() {
        // Each key of 3 bytes costs 3 + 8: three fit in 33 bytes, not four.
        let mut window = Window::new(33);
        for name in [
            "f09", "f03", "f07", "f01", "f05", "f02", "f08", "f04", "f06",
        ] {
            window.push(name, false);
        }
        assert!(window.bytes() <= 66, "never past twice the budget");
        let window = window.finish();
        assert_eq!(keys(&window), ["f01", "f02", "f03"]);
        assert!(window.more);
        assert_eq!(window.bytes(), 33);
    }

    #[test]
    fn a_window_keeps_one_key_whatever_its_size() {
        let long = "x".repeat(255);
        let mut window = Window::new(1);
        window.push(&long, true);
        window.push("y", false);
        let window = window.finish();
        assert_eq!(keys(&window), [format!("{long}/").as_str()]);
        assert!(window.more);
    }

    #[test]
    fn after_compares_as_the_key_would() {
        let cases = [
            // (name, dir, cursor)
            ("b", false, "a"),
            ("a", false, "b"),
            ("a", false, "a"),
            ("a", true, "a"),
            ("a", true, "a/"),
            ("a", true, "a-b"),
            ("a", true, "a0"),
            ("a", false, "a-b"),
            ("a.md", false, "a"),
            ("a.md", false, "a/"),
            ("ab", true, "a/"),
            ("", false, "a"),
        ];
        for (name, dir, cursor) in cases {
            let key = if dir {
                format!("{name}/")
            } else {
                name.to_owned()
            };
            assert_eq!(
                after(name, dir, cursor),
                key.as_str() > cursor,
                "{key:?} after {cursor:?}"
            );
        }
    }
}
