# A store on a small filesystem of its own, so that a test can fill it
# without touching the machine's disk: `setup_small_store MIB [ext4|xfs]`
# makes a sparse image in the test's temporary directory, formats it,
# loop-mounts it and points ESBX_ROOT beneath it; teardown_small_store
# removes the store, then the mount and the image.  The default hooks do
# both.

load helpers

setup_small_store() {
  local mib=$1 fstype=${2:-ext4}
  SMALL_IMG=$BATS_TEST_TMPDIR/store.img
  SMALL_MNT=$BATS_TEST_TMPDIR/store-fs
  truncate -s "${mib}M" "$SMALL_IMG"
  case $fstype in
    ext4) mkfs.ext4 -q -F -m 0 "$SMALL_IMG" ;;
    xfs) command -v mkfs.xfs >/dev/null || skip "mkfs.xfs is not installed"
      mkfs.xfs -q -f "$SMALL_IMG" ;;
  esac
  mkdir -p "$SMALL_MNT"
  mount -o loop "$SMALL_IMG" "$SMALL_MNT"
  ESBX_ROOT=$SMALL_MNT/root
  mkdir "$ESBX_ROOT"
  ESBX_STORE_OF_TEST=$BATS_TEST_TMPDIR
  export ESBX_ROOT SMALL_IMG SMALL_MNT
}

teardown_small_store() {
  teardown_store
  if [ -n "${SMALL_MNT:-}" ]; then
    umount "$SMALL_MNT" 2>/dev/null || umount -l "$SMALL_MNT" 2>/dev/null || true
    rm -f "$SMALL_IMG"
  fi
}

# Free bytes of the small store's filesystem.
small_free() { df -B1 --output=avail "$SMALL_MNT" | tail -n 1 | tr -d ' '; }

# Allocated bytes of FILE (what it takes on disk, holes excluded).
allocated() { echo $(($(stat -c %b "$1") * $(stat -c %B "$1"))); }
