//! Unit tests of the module above: what each setting and parse gives, exactly.

use super::confirmed_ms;

/// A renewal confirms what the database has left of the lease, less 1 % and 10 ms; never
/// less than nothing.
#[test]
fn a_renewal_confirms_the_lease_left_less_a_hundredth_and_10_ms() {
    assert_eq!(confirmed_ms(9_999), 9_999 - 99 - 10);
    assert_eq!(confirmed_ms(4_999), 4_999 - 49 - 10);
    assert_eq!(confirmed_ms(1_000), 1_000 - 10 - 10);
    assert_eq!(confirmed_ms(10), 0);
    assert_eq!(confirmed_ms(0), 0);
}
