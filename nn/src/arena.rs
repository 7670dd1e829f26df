//! Storage reuse in evaluation. While an evaluation forward pass of a [`crate::net::Graph`] runs
//! on a thread, the large activations it is done with go to a free list, and the layers take the
//! storage of their outputs from it, so a pass does not fault in fresh pages (which the operating
//! system clears) for every layer's output. Every output is written whole before it is read, so
//! the values do not depend on which buffer a layer gets. Outside such a pass, or for small
//! tensors, storage comes from and goes back to the allocator as usual.

use std::cell::RefCell;

use ndarray::ArrayD;

/// An activation tensor (the layers' `Tensor`).
type Tensor = ArrayD<f32>;

/// Values in the smallest buffer the free list keeps (256 KiB; the allocator reuses smaller
/// ones itself).
const MIN_VALUES: usize = 1 << 16;

/// Buffers the free list keeps at most: the smallest go back to the allocator beyond.
const KEPT: usize = 4;

thread_local! {
    /// This thread's free list while an [`Arena`] is open on it.
    static FREE: RefCell<Option<Vec<Vec<f32>>>> = const { RefCell::new(None) };
}

/// Keeps this thread's free list open while alive. Arenas nest: the outermost one closes the
/// list and hands its buffers back to the allocator.
pub struct Arena {
    outermost: bool,
}

impl Arena {
    /// Opens the free list on this thread (or joins the one already open).
    pub fn open() -> Self {
        let outermost = FREE.with(|f| {
            let mut f = f.borrow_mut();
            let closed = f.is_none();
            if closed {
                *f = Some(Vec::new());
            }
            closed
        });
        Self { outermost }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if self.outermost {
            FREE.with(|f| f.borrow_mut().take());
        }
    }
}

/// An empty vector with room for `len` values: the smallest free buffer that holds them and is
/// at most twice as large, else a new allocation.
pub fn take(len: usize) -> Vec<f32> {
    let reused = (len >= MIN_VALUES)
        .then(|| {
            FREE.with(|f| {
                let mut f = f.borrow_mut();
                let free = f.as_mut()?;
                let fits = |v: &Vec<f32>| (len..=len.saturating_mul(2)).contains(&v.capacity());
                let (at, _) = free
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| fits(v))
                    .min_by_key(|(_, v)| v.capacity())?;
                Some(free.swap_remove(at))
            })
        })
        .flatten();
    match reused {
        Some(mut v) => {
            v.clear();
            v
        }
        None => Vec::with_capacity(len),
    }
}

/// Hands `t`'s storage to the free list if one is open on this thread and it is large enough;
/// otherwise drops it.
pub fn give(t: Tensor) {
    give_vec(t.into_raw_vec_and_offset().0);
}

/// [`give`] for a vector.
pub fn give_vec(v: Vec<f32>) {
    if v.capacity() < MIN_VALUES {
        return;
    }
    FREE.with(|f| {
        if let Some(free) = f.borrow_mut().as_mut() {
            free.push(v);
            if free.len() > KEPT {
                let smallest = (0..free.len()).min_by_key(|&i| free[i].capacity());
                if let Some(i) = smallest {
                    free.swap_remove(i);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_given_buffer_only_while_open() {
        let len = MIN_VALUES + 5;
        // Closed: storage goes back to the allocator.
        give_vec(vec![1.0; len]);
        assert!(FREE.with(|f| f.borrow().is_none()));
        let arena = Arena::open();
        let v = vec![1.0f32; len];
        let ptr = v.as_ptr();
        give_vec(v);
        // Too small for it, or more than twice its size: a new allocation.
        let (larger, smaller) = (take(len + 1), take(len / 2 - 1));
        assert_ne!(larger.as_ptr(), ptr);
        assert_ne!(smaller.as_ptr(), ptr);
        let again = take(len - 3);
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
        assert!(again.capacity() >= len - 3);
        give_vec(again);
        {
            // A nested arena shares the list and does not close it.
            let _inner = Arena::open();
        }
        assert_eq!(FREE.with(|f| f.borrow().as_ref().map(Vec::len)), Some(1));
        drop(arena);
        assert!(FREE.with(|f| f.borrow().is_none()));
    }

    #[test]
    fn keeps_the_largest_buffers() {
        let _arena = Arena::open();
        for k in 0..KEPT + 2 {
            give_vec(Vec::with_capacity(MIN_VALUES + k));
        }
        // Small tensors never enter the list.
        give_vec(Vec::with_capacity(MIN_VALUES - 1));
        let mut caps: Vec<usize> = FREE.with(|f| {
            let f = f.borrow();
            f.iter().flatten().map(Vec::capacity).collect()
        });
        caps.sort_unstable();
        let want: Vec<usize> = (2..KEPT + 2).map(|k| MIN_VALUES + k).collect();
        assert_eq!(caps, want);
    }
}
