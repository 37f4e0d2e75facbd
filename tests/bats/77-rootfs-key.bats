#!/usr/bin/env bats
# --rootfs images are kept in the store by a key: it must name their
# content, so that no crafted source can take another image's place.

# In a user namespace, the default (helpers.bash).
ESBX_USERNS=auto
load helpers

setup() {
  setup_project
  local busybox=/bin/busybox
  file -L "$busybox" | grep -q 'statically linked' || skip "needs busybox-static"
}

teardown() {
  teardown_store
}

# `image DIR WORD`: a busybox userland whose /etc/image says WORD.
image() {
  local dir=$1 a
  mkdir -p "$dir"/{bin,etc,tmp}
  cp /bin/busybox "$dir/bin/busybox"
  for a in sh cat ls; do
    ln -s busybox "$dir/bin/$a"
  done
  echo "$2" >"$dir/etc/image"
}

@test "rootfs: a directory crafted to the old key of another image does not replace it" {
  local a=$BATS_TEST_TMPDIR/a b=$BATS_TEST_TMPDIR/b key
  image "$a" genuine
  image "$b" crafted
  # B gets 100 empty files whose mtimes make its old key A's (the script
  # says how): an attacker's directory, made first.
  key=$(python3 "$BATS_TEST_DIRNAME/rootfs_collide.py" "$a" "$b")
  [ -n "$key" ]
  make_session p evil --rootfs "$b"
  esbx_ok exec evil -- cat /etc/image
  assert_output crafted
  # Every later session of A must run A.
  make_session p victim --rootfs "$a"
  esbx_ok exec victim -- cat /etc/image
  assert_output genuine
  esbx_ok --json session inspect victim
  local ka kb
  ka=$(jq -r .rootfs <<<"$output")
  esbx_ok --json session inspect evil
  kb=$(jq -r .rootfs <<<"$output")
  [ "$ka" != "$kb" ]
  # Full SHA-256 keys.
  [[ $ka =~ ^[0-9a-f]{64}$ ]] || fail "key $ka is not a full SHA-256"
}

@test "rootfs: the key covers content, names, modes, owners and link targets, not times" {
  local d=$BATS_TEST_TMPDIR/d k0 k
  image "$d" one
  # A setuid file: the import strips the bit, so the key must leave it out
  # for the source to find its own import again.
  chmod 4755 "$d/bin/busybox"
  key_of() {
    make_session p "$1" --rootfs "$d"
    "$ESBX" --json session inspect "$1" | jq -r .rootfs
  }
  k0=$(key_of s0)
  # Same content, other times: the same image, shared.
  touch -d '2001-01-01' "$d/etc/image" "$d/bin" "$d"
  k=$(key_of s1)
  assert_equal "$k" "$k0"
  # Found, not imported again: one tree, one staging directory never made.
  run ls "$ESBX_ROOT/rootfs"
  assert_output "$k0"
  # Same size and time, other content: another image.
  printf 'two\n' >"$d/etc/image"
  touch -d '2001-01-01' "$d/etc/image"
  k=$(key_of s2)
  [ "$k" != "$k0" ]
  esbx_ok exec s2 -- cat /etc/image
  assert_output two
  local k2=$k
  chmod 0600 "$d/etc/image"
  k=$(key_of s3)
  [ "$k" != "$k2" ]
  local k3=$k
  chown 1:1 "$d/etc/image"
  k=$(key_of s4)
  [ "$k" != "$k3" ]
  local k4=$k
  ln -sfn ls "$d/bin/cat"
  k=$(key_of s5)
  [ "$k" != "$k4" ]
  local k5=$k
  mv "$d/etc/image" "$d/etc/imagf"
  k=$(key_of s6)
  [ "$k" != "$k5" ]
}

@test "rootfs: an archive is keyed by the full SHA-256 of its bytes" {
  local d=$BATS_TEST_TMPDIR/d
  image "$d" tarred
  tar -C "$d" -cf "$BATS_TEST_TMPDIR/img.tar" .
  make_session p t1 --rootfs "$BATS_TEST_TMPDIR/img.tar"
  esbx_ok --json session inspect t1
  assert_equal "$(jq -r .rootfs <<<"$output")" "$(sha256sum "$BATS_TEST_TMPDIR/img.tar" | cut -d' ' -f1)"
  esbx_ok exec t1 -- cat /etc/image
  assert_output tarred
}
