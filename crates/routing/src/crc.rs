//! CRC-32 as PHP's `crc32()` computes it (the IEEE polynomial, reflected), shaped for the
//! legacy pick, which hashes `key . implode('', $origins)`: the origins' part is the same
//! for every request to a region, so its checksum is computed once, when the region is
//! parsed, and a request only hashes its key and joins the two.
//!
//! Joining uses the linearity of CRC: for any `a` and `b`,
//! `crc(a . b) = shift(crc(a), len(b)) ^ crc(b)`, where `shift` runs the CRC register over
//! `len(b)` zero bytes (no pre- or post-inversion: those cancel out). `shift` by a fixed
//! count is linear in the 32 register bits, so it is four table lookups. A [`Suffix`]
//! keeps the tables for its own length (4 KiB, built on first use of that length in the
//! process and shared by every suffix of that length, up to 255 bytes), so a pick costs
//! the key's checksum plus four lookups. Longer suffixes shift with tables for 1, 2, 4,
//! ... 128 bytes (built at compile time), one step per bit set in the length.

use std::sync::OnceLock;

/// The reflected IEEE polynomial.
const POLYNOMIAL: u32 = 0xEDB8_8320;

/// Keys up to this long are hashed a byte at a time (a few instructions each); longer ones
/// go to crc32fast, which is faster on long input and gives the same checksum.
const BYTEWISE_MAX: usize = 16;

/// The CRC register's update for one byte: `register = (register >> 8) ^ BYTE[low byte]`.
static BYTE: [u32; 256] = byte_table();

/// `SHIFT[k][j][b]`: the register `b << 8j` run over 2^k zero bytes.
static SHIFT: [[[u32; 256]; 4]; 8] = shift_tables();

/// The four lookup tables of a linear map on the 32 register bits.
type Tables = [[u32; 256]; 4];

/// `BY_LENGTH[n]`: the tables of the shift over exactly `n` zero bytes, once needed.
static BY_LENGTH: [OnceLock<Box<Tables>>; 256] = [const { OnceLock::new() }; 256];

/// Bytes that always come last in what is hashed, with their checksum and their shift.
#[derive(Clone, Copy)]
pub(crate) struct Suffix {
    crc: u32,
    len: usize,
    /// The shift over `len` zero bytes as tables, for `len` up to 255.
    shift: Option<&'static Tables>,
}

impl Suffix {
    pub(crate) fn of(bytes: &[u8]) -> Suffix {
        let len = bytes.len();
        let shift = BY_LENGTH.get(len).map(|slot| {
            &**slot.get_or_init(|| {
                let mut basis = [0u32; 32];
                for (bit, image) in basis.iter_mut().enumerate() {
                    *image = shift(1 << bit, len);
                }
                Box::new(tables_of(&basis))
            })
        });
        Suffix {
            crc: checksum(bytes),
            len,
            shift,
        }
    }

    /// `crc32(key . suffix)`.
    #[inline(always)]
    pub(crate) fn checksum_after(&self, key: &[u8]) -> u32 {
        let key = checksum(key);
        let shifted = match self.shift {
            Some(tables) => apply(tables, key),
            None => shift(key, self.len),
        };
        shifted ^ self.crc
    }
}

/// Two suffixes are equal when their bytes hash alike; the tables follow from the length.
impl PartialEq for Suffix {
    fn eq(&self, other: &Suffix) -> bool {
        (self.crc, self.len) == (other.crc, other.len)
    }
}

impl Eq for Suffix {}

impl std::fmt::Debug for Suffix {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "Suffix(crc {:#010x}, {} bytes)",
            self.crc, self.len
        )
    }
}

/// `crc32(bytes)`, as PHP's `crc32()` returns it.
#[inline(always)]
pub(crate) fn checksum(bytes: &[u8]) -> u32 {
    if bytes.len() > BYTEWISE_MAX {
        return checksum_long(bytes);
    }
    let mut register = !0u32;
    for &byte in bytes {
        register = (register >> 8) ^ BYTE[((register ^ u32::from(byte)) & 0xff) as usize];
    }
    !register
}

/// Kept out of line so that the short-key loop above inlines into `resolve()`.
#[inline(never)]
fn checksum_long(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The register `register` run over `count` zero bytes.
#[inline]
fn shift(mut register: u32, mut count: usize) -> u32 {
    // Whole blocks of 128 bytes first (origins joined longer than that are rare).
    while count >= 256 {
        register = apply(&SHIFT[7], apply(&SHIFT[7], register));
        count -= 256;
    }
    let mut power = 0;
    while count != 0 {
        if count & 1 != 0 {
            register = apply(&SHIFT[power], register);
        }
        count >>= 1;
        power += 1;
    }
    register
}

#[inline]
const fn apply(tables: &[[u32; 256]; 4], register: u32) -> u32 {
    tables[0][(register & 0xff) as usize]
        ^ tables[1][((register >> 8) & 0xff) as usize]
        ^ tables[2][((register >> 16) & 0xff) as usize]
        ^ tables[3][(register >> 24) as usize]
}

const fn byte_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut register = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            register = if register & 1 != 0 {
                (register >> 1) ^ POLYNOMIAL
            } else {
                register >> 1
            };
            bit += 1;
        }
        table[byte] = register;
        byte += 1;
    }
    table
}

/// The four lookup tables of a linear map on 32 bits, given the images of the 32 bits.
const fn tables_of(basis: &[u32; 32]) -> [[u32; 256]; 4] {
    let mut tables = [[0u32; 256]; 4];
    let mut part = 0;
    while part < 4 {
        let mut byte = 0;
        while byte < 256 {
            let mut image = 0;
            let mut bit = 0;
            while bit < 8 {
                if byte & (1 << bit) != 0 {
                    image ^= basis[part * 8 + bit];
                }
                bit += 1;
            }
            tables[part][byte] = image;
            byte += 1;
        }
        part += 1;
    }
    tables
}

const fn shift_tables() -> [[[u32; 256]; 4]; 8] {
    let byte_table = byte_table();
    // One zero byte: register = (register >> 8) ^ BYTE[register & 0xff].
    let mut basis = [0u32; 32];
    let mut bit = 0;
    while bit < 32 {
        let register = 1u32 << bit;
        basis[bit] = (register >> 8) ^ byte_table[(register & 0xff) as usize];
        bit += 1;
    }
    let mut shifts = [[[0u32; 256]; 4]; 8];
    let mut power = 0;
    while power < 8 {
        shifts[power] = tables_of(&basis);
        // 2^(power+1) zero bytes: the 2^power shift applied twice.
        let mut bit = 0;
        while bit < 32 {
            basis[bit] = apply(&shifts[power], basis[bit]);
            bit += 1;
        }
        power += 1;
    }
    shifts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_checksums() {
        // The standard check value of CRC-32/ISO-HDLC, which PHP's crc32() is.
        for input in [
            &b""[..],
            b"DE",
            b"The quick brown fox jumps over the lazy dog",
        ] {
            assert_eq!(checksum(input), crc32fast::hash(input));
        }
        assert_eq!(checksum(b"123456789"), 0xCBF4_3926);
    }

    proptest! {
        #[test]
        fn joining_checksums_is_the_checksum_of_the_joined_bytes(
            a in proptest::collection::vec(any::<u8>(), 0..40),
            b in proptest::collection::vec(any::<u8>(), 0..700),
        ) {
            let joined = [a.as_slice(), b.as_slice()].concat();
            prop_assert_eq!(checksum(&a), crc32fast::hash(&a));
            prop_assert_eq!(Suffix::of(&b).checksum_after(&a), crc32fast::hash(&joined));
            // The power-of-two shift, which lengths over 255 use, for every length.
            prop_assert_eq!(
                shift(checksum(&a), b.len()) ^ checksum(&b),
                crc32fast::hash(&joined)
            );
        }
    }
}
