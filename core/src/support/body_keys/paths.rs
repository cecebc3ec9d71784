//! The paths a [`BodyKeys`](super::BodyKeys) reads, as a small tree built at compile
//! time: the objects on the way to the fields (nodes) and the steps between them.

/// The most fields one reader reads.
pub(super) const MAX_FIELDS: usize = 8;
/// The most keys in one path (`data.object.id` has three).
pub(super) const MAX_DEPTH: usize = 4;
/// The most steps (distinct `(object, key)` pairs) of all paths together.
const MAX_STEPS: usize = MAX_FIELDS * MAX_DEPTH;
/// The most objects on the paths, the body itself included.
const MAX_NODES: usize = MAX_STEPS + 1;

/// Where a step leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// An object on the path to some fields.
    Node(u8),
    /// A field that is read.
    Leaf(u8),
}

/// One key of one object on the paths.
#[derive(Debug, Clone, Copy)]
struct Step {
    parent: u8,
    name: &'static [u8],
    target: Target,
}

impl Step {
    const EMPTY: Self = Self {
        parent: 0,
        name: b"",
        target: Target::Leaf(0),
    };
}

/// The tree of paths.
#[derive(Debug, Clone, Copy)]
pub(super) struct Paths {
    steps: [Step; MAX_STEPS],
    step_count: usize,
    /// For each node, the fields under it (node 0, the body: all of them).
    leaves: [u16; MAX_NODES],
    fields: usize,
}

/// Compares two byte strings in a `const fn`.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl Paths {
    /// Builds the tree of `paths`.
    ///
    /// # Panics
    /// At compile time (in a `const`), when there are more than [`MAX_FIELDS`] paths,
    /// a path is empty or deeper than [`MAX_DEPTH`], two paths are the same, or one
    /// path is the prefix of another (a field cannot be both read and walked through).
    pub(super) const fn new(paths: &[&'static [&'static str]]) -> Self {
        assert!(paths.len() <= MAX_FIELDS, "at most 8 fields per reader");
        let mut tree = Self {
            steps: [Step::EMPTY; MAX_STEPS],
            step_count: 0,
            leaves: [0; MAX_NODES],
            fields: paths.len(),
        };
        let mut node_count = 1;
        let mut field = 0;
        while field < paths.len() {
            let path = paths[field];
            assert!(
                !path.is_empty() && path.len() <= MAX_DEPTH,
                "a path has one to four keys"
            );
            let bit = 1u16 << field;
            tree.leaves[0] |= bit;
            let mut node = 0u8;
            let mut depth = 0;
            while depth < path.len() {
                let name = path[depth].as_bytes();
                let last = depth + 1 == path.len();
                let mut found = None;
                let mut s = 0;
                while s < tree.step_count {
                    let step = tree.steps[s];
                    if step.parent == node && same(step.name, name) {
                        found = Some(step.target);
                    }
                    s += 1;
                }
                node = match (found, last) {
                    (Some(Target::Node(next)), false) => next,
                    (Some(_), _) => panic!("two paths are the same, or one is a prefix of another"),
                    (None, true) => {
                        tree.steps[tree.step_count] = Step {
                            parent: node,
                            name,
                            target: Target::Leaf(field as u8),
                        };
                        tree.step_count += 1;
                        node
                    }
                    (None, false) => {
                        let next = node_count as u8;
                        node_count += 1;
                        tree.steps[tree.step_count] = Step {
                            parent: node,
                            name,
                            target: Target::Node(next),
                        };
                        tree.step_count += 1;
                        next
                    }
                };
                if !last {
                    tree.leaves[node as usize] |= bit;
                }
                depth += 1;
            }
            field += 1;
        }
        tree
    }

    /// Returns the number of fields.
    pub(super) fn fields(&self) -> usize {
        self.fields
    }

    /// Returns the fields under `node` (all of them for the body, node 0).
    #[inline]
    pub(super) fn leaves(&self, node: u8) -> u16 {
        self.leaves[usize::from(node)]
    }

    /// Returns where `key` leads from `node` and the index of its step, or `None`
    /// when it leads to nothing read.
    #[inline]
    pub(super) fn step(&self, node: u8, key: &[u8]) -> Option<(Target, usize)> {
        self.steps[..self.step_count]
            .iter()
            .enumerate()
            .find(|(_, step)| step.parent == node && step.name == key)
            .map(|(i, step)| (step.target, i))
    }
}
