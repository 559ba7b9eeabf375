//! A slab whose handles carry a generation, so a stale handle can never reach a reused slot.

/// A handle into a [`Slab`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self { slots: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn insert(&mut self, val: T) -> Key {
        self.len += 1;
        if let Some(idx) = self.free.pop() {
            if let Some(slot) = self.slots.get_mut(idx as usize) {
                slot.gen = slot.gen.wrapping_add(1);
                slot.val = Some(val);
                return Key { idx, gen: slot.gen };
            }
        }
        // More than u32::MAX live entries is impossible under any Limits, so the index fits.
        let idx = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
        self.slots.push(Slot { gen: 0, val: Some(val) });
        Key { idx, gen: 0 }
    }

    pub(crate) fn get(&self, k: Key) -> Option<&T> {
        self.slots.get(k.idx as usize).filter(|s| s.gen == k.gen).and_then(|s| s.val.as_ref())
    }

    pub(crate) fn get_mut(&mut self, k: Key) -> Option<&mut T> {
        self.slots.get_mut(k.idx as usize).filter(|s| s.gen == k.gen).and_then(|s| s.val.as_mut())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let idx = u32::try_from(i).ok()?;
            s.val.as_ref().map(|v| (Key { idx, gen: s.gen }, v))
        })
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (Key, &mut T)> {
        self.slots.iter_mut().enumerate().filter_map(|(i, s)| {
            let idx = u32::try_from(i).ok()?;
            let gen = s.gen;
            s.val.as_mut().map(|v| (Key { idx, gen }, v))
        })
    }

    pub(crate) fn remove(&mut self, k: Key) -> Option<T> {
        let slot = self.slots.get_mut(k.idx as usize).filter(|s| s.gen == k.gen)?;
        let val = slot.val.take()?;
        self.free.push(k.idx);
        self.len -= 1;
        Some(val)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_miss() {
        let mut s = Slab::default();
        let a = s.insert(1);
        assert_eq!(s.remove(a), Some(1));
        let b = s.insert(2);
        assert_eq!(a.idx, b.idx);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(b), Some(&2));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.len(), 1);
    }
}
