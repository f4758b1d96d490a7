//! The check a decoded pickle passes before it is handed out: no cycles, no nesting deeper
//! than [`MAX_DEPTH`], found by a walk that does not recurse.

use super::machine::{bad, too_deep};
use super::{describe, Ref, Value, MAX_DEPTH};
use quill_core::Result;

/// Refuses a result that holds a cycle or nests deeper than [`MAX_DEPTH`]: an iterative
/// depth-first walk from `root` with each value's height memoised, so shared values are
/// visited once and nothing recurses.
pub(super) fn check_graph(values: &[Value], root: Ref) -> Result<()> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; values.len()];
    let mut height = vec![0u32; values.len()];
    let mut path: Vec<(usize, usize)> = vec![(root.0, 0)];
    state[root.0] = ON_PATH;
    while let Some(top) = path.last_mut() {
        let (node, i) = *top;
        top.1 += 1;
        let up = match values[node].child(i) {
            Some(c) => match state[c.0] {
                UNSEEN => {
                    state[c.0] = ON_PATH;
                    path.push((c.0, 0));
                    // Every value on the path but the last is a container one level deeper.
                    if path.len() - 1 > MAX_DEPTH as usize {
                        return Err(too_deep());
                    }
                    continue;
                }
                ON_PATH => {
                    return Err(bad(format!(
                        "the pickle holds a cycle: a {} contains itself (directly or through \
                         its items); data pickles have none",
                        describe(&values[c.0])
                    )))
                }
                _ => height[c.0],
            },
            None => {
                // All children seen: `node` is finished; its parent's height takes it in.
                state[node] = DONE;
                path.pop();
                let h = height[node]
                    + u32::from(matches!(
                        values[node],
                        Value::List(_) | Value::Tuple(_) | Value::Dict(_)
                    ));
                height[node] = h;
                if h > MAX_DEPTH {
                    return Err(too_deep());
                }
                match path.last() {
                    Some(&(parent, _)) => {
                        height[parent] = height[parent].max(h);
                        continue;
                    }
                    None => break,
                }
            }
        };
        height[node] = height[node].max(up);
    }
    Ok(())
}
