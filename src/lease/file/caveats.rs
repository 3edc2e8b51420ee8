//! What the file store cannot promise on this host ([`Caveat`]), found by looking: whether
//! `/var/tmp` can hold the host's anchors, and whether this process shares the host's
//! network namespace (where the host-wide claim lives). Only read, never written: `/proc`
//! and `/var/tmp`'s own status.

use super::FileStore;
use crate::Caveat;

impl FileStore {
    /// The caveats of this store where it runs (none in the tests' own hosts).
    pub(super) fn find_caveats(&self) -> Vec<Caveat> {
        if self.host_scope.is_some() {
            return Vec::new();
        }
        let mut found = Vec::new();
        if let Some(why) = self.anchors.unusable() {
            found.push(Caveat::AnchorsUnused { why });
        }
        if let Some(why) = other_network_namespace() {
            found.push(Caveat::OtherNetworkNamespace { why });
        }
        found
    }
}

/// Whether `/var/tmp` is private to this process's service, from `/proc/self/mountinfo`'s
/// text: the last mount at `/var/tmp` shows a root under a `systemd-private-` directory
/// (systemd's `PrivateTmp=` bind-mounts one there).
pub(super) fn var_tmp_is_private(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        .rev()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let root = fields.nth(3)?;
            let mount_point = fields.next()?;
            (mount_point == "/var/tmp").then_some(root)
        })
        .next()
        .is_some_and(|root| root.contains("/systemd-private-"))
}

/// Whether `/proc/net/dev`'s text lists no interface but loopback: a network namespace of
/// its own with nothing in it (systemd's `PrivateNetwork=`, `unshare --net`).
pub(super) fn loopback_only(net_dev: &str) -> bool {
    let mut names = net_dev
        .lines()
        .skip(2)
        .filter_map(|line| line.split(':').next())
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .peekable();
    names.peek().is_some() && names.all(|name| name == "lo")
}

/// Why this process is in a network namespace other than the host's, where that can be
/// told: another namespace than pid 1's (when this user may read pid 1's), or one with
/// nothing but loopback.
fn other_network_namespace() -> Option<String> {
    let mine = std::fs::read_link("/proc/self/ns/net").ok()?;
    if let Ok(host) = std::fs::read_link("/proc/1/ns/net")
        && host != mine
    {
        return Some(format!(
            "{}, the host's (pid 1's) is {}",
            mine.display(),
            host.display()
        ));
    }
    let dev = std::fs::read_to_string("/proc/net/dev").ok()?;
    loopback_only(&dev).then(|| format!("{}, with no interface but lo", mine.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_var_tmp_is_told_by_its_mount_root() {
        let host = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n";
        assert!(!var_tmp_is_private(host));
        let own_partition = format!("{host}40 22 8:2 / /var/tmp rw shared:9 - ext4 /dev/vdb rw\n");
        assert!(!var_tmp_is_private(&own_partition));
        let private = format!(
            "{host}41 22 8:1 /tmp/systemd-private-4f1c-monoflake.service-Ab12/tmp /var/tmp \
             rw,relatime - ext4 /dev/vda rw\n"
        );
        assert!(var_tmp_is_private(&private));
        // A later mount over it decides.
        let remounted = format!("{private}42 41 0:50 / /var/tmp rw - tmpfs tmpfs rw\n");
        assert!(!var_tmp_is_private(&remounted));
    }

    #[test]
    fn a_namespace_with_only_loopback_is_told() {
        let header = "Inter-|   Receive |  Transmit\n face |bytes    packets\n";
        assert!(loopback_only(&format!("{header}    lo: 0 0 0\n")));
        assert!(!loopback_only(&format!(
            "{header}    lo: 0 0 0\n  eth0: 10 1 0\n"
        )));
        assert!(!loopback_only(header));
    }
}
