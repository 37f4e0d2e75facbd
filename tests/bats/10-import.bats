#!/usr/bin/env bats
# project create --from: directories, archives (tar, tar.gz, tar.zst,
# tar.xz, zip), a hand-built `docker save` archive with whiteouts, and
# hostile archives that must fail with one line and leave no project.

load helpers

setup() {
  setup_store
  src=$BATS_TEST_TMPDIR/src
  make_tree "$src"
  chmod 0750 "$src/docs"
  touch -h -d @1000000000 "$src/docs/guide.txt" "$src/docs" "$src/link"
  outside=$BATS_TEST_TMPDIR/outside
  mkdir -p "$outside"
}

# The base layer's tree of project P.
layer0() {
  local id
  id=$(head -n1 "$ESBX_ROOT/projects/$1/stack")
  echo "$ESBX_ROOT/projects/$1/layers/$id/diff"
}

# Nothing of a failed create is left: no project, no temp dirs with content.
no_project_left() {
  run ls -A "$ESBX_ROOT/projects"
  assert_output ""
  esbx_fails 1 project log "$1"
}

# One line on stderr, exit 1, nothing left, nothing written outside.
refused() {
  local name=$1 from=$2 want=$3
  esbx_fails 1 project create "$name" --from "$from"
  [ "${#lines[@]}" -eq 1 ] || { echo "more than one line: $output" >&2; return 1; }
  assert_output --partial "$want"
  no_project_left "$name"
  run ls -A "$outside"
  assert_output ""
}

# python3 tarfile writes the hostile archives: GNU tar refuses to.
pytar() {
  python3 - "$@"
}

@test "import a directory: content, modes, mtimes and symlinks are kept" {
  esbx_ok project create p --from "$src"
  d=$(layer0 p)
  diff -r --no-dereference "$src" "$d"
  [ "$(stat -c %a "$d/docs")" = 750 ]
  [ "$(stat -c %Y "$d/docs/guide.txt")" = 1000000000 ]
  [ "$(stat -c %Y "$d/docs")" = 1000000000 ]
  [ -L "$d/link" ]
  [ "$(readlink "$d/link")" = README ]
}

@test "import a directory with a symlink to a host file copies the link, not the file" {
  ln -s /etc/passwd "$src/pw"
  ln -s /etc "$src/etc"
  esbx_ok project create p --from "$src"
  d=$(layer0 p)
  [ -L "$d/pw" ]
  [ "$(readlink "$d/pw")" = /etc/passwd ]
  [ -L "$d/etc" ]
}

@test "import a directory with a socket or a device is refused" {
  python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$src/sock"
  refused p "$src" "device nodes and sockets are not allowed"
  rm "$src/sock"
  mknod "$src/null" c 1 3
  refused p "$src" "device nodes and sockets are not allowed"
}

@test "import tar, tar.gz, tar.zst, tar.xz and zip archives" {
  tar -C "$src" -cf "$BATS_TEST_TMPDIR/x.tar" .
  tar -C "$src" -czf "$BATS_TEST_TMPDIR/x.tar.gz" .
  tar -C "$src" --zstd -cf "$BATS_TEST_TMPDIR/x.tar.zst" .
  tar -C "$src" -cJf "$BATS_TEST_TMPDIR/x.tar.xz" .
  (cd "$src" && zip -qry "$BATS_TEST_TMPDIR/x.zip" .)
  for f in x.tar x.tar.gz x.tar.zst x.tar.xz x.zip; do
    name=p-${f//./-}
    esbx_ok project create "$name" --from "$BATS_TEST_TMPDIR/$f"
    d=$(layer0 "$name")
    diff -r --no-dereference "$src" "$d"
    [ "$(stat -c %Y "$d/docs/guide.txt")" = 1000000000 ]
    [ -L "$d/link" ]
  done
  make_session p-x-tar-zst s1
  [ "$(cat "$m/README")" = hello ]
}

@test "setuid and setgid bits are stripped with a warning" {
  printf '#!/bin/sh\n' >"$src/suid"
  chmod 04755 "$src/suid"
  mkdir "$src/sgid" && chmod 02775 "$src/sgid"
  tar -C "$src" -cf "$BATS_TEST_TMPDIR/x.tar" .
  esbx_ok project create p --from "$BATS_TEST_TMPDIR/x.tar"
  assert_output --partial "stripped setuid/setgid bits from \`suid\`"
  d=$(layer0 p)
  [ "$(stat -c %a "$d/suid")" = 755 ]
  [ "$(stat -c %a "$d/sgid")" = 775 ]
}

@test "a docker save archive is flattened: whiteouts and opaque markers delete, none remain" {
  img=$BATS_TEST_TMPDIR/image.tar
  pytar "$img" <<'EOF'
import io, json, sys, tarfile

def layer(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1600000000
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(data), 0o644
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()

l1 = layer([("etc", "dir", None), ("etc/os-release", "file", b"base\n"),
            ("etc/passwd", "file", b"root:x:0:0\n"),
            ("app", "dir", None), ("app/old1", "file", b"1\n"),
            ("app/sub", "dir", None), ("app/sub/old2", "file", b"2\n"),
            ("bin", "dir", None), ("bin/sh", "file", b"sh\n"),
            ("usr", "link", "bin")])
# The opaque marker follows the layer's own app/new on purpose.
l2 = layer([("etc", "dir", None), ("etc/.wh.os-release", "file", b""),
            ("app", "dir", None), ("app/new", "file", b"new\n"),
            ("app/.wh..wh..opq", "file", b""),
            (".wh.usr", "file", b""), ("usr", "dir", None), ("usr/x", "file", b"x\n")])
l3 = layer([("etc", "dir", None), ("etc/motd", "file", b"hi\n")])
manifest = [{"Config": "cfg.json", "RepoTags": ["esbx/test:latest"],
             "Layers": ["aaa/layer.tar", "bbb/layer.tar", "ccc/layer.tar"]}]
with tarfile.open(sys.argv[1], "w") as out:
    for name, data in [("aaa/layer.tar", l1), ("bbb/layer.tar", l2), ("ccc/layer.tar", l3),
                       ("cfg.json", b"{}"), ("manifest.json", json.dumps(manifest).encode())]:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        out.addfile(ti, io.BytesIO(data))
EOF
  esbx_ok project create img --from "$img"
  d=$(layer0 img)
  [ ! -e "$d/etc/os-release" ]
  [ "$(cat "$d/etc/passwd")" = "root:x:0:0" ]
  [ "$(cat "$d/etc/motd")" = hi ]
  [ ! -e "$d/app/old1" ]
  [ ! -e "$d/app/sub" ]
  [ "$(cat "$d/app/new")" = new ]
  [ -d "$d/usr" ]
  [ ! -L "$d/usr" ]
  [ "$(cat "$d/usr/x")" = x ]
  [ "$(cat "$d/bin/sh")" = sh ]
  run find "$d" -name '.wh.*'
  assert_output ""
  run find "$d" -type c
  assert_output ""
  [ ! -e "$d/manifest.json" ]
  [ ! -e "$d/aaa" ]
  esbx_ok fsck img
}

@test "a docker save layer with leftover .wh. names is refused" {
  img=$BATS_TEST_TMPDIR/image.tar
  pytar "$img" <<'EOF'
import io, json, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    ti = tarfile.TarInfo(".wh..wh.plnk")
    ti.type = tarfile.DIRTYPE
    t.addfile(ti)
l = buf.getvalue()
with tarfile.open(sys.argv[1], "w") as out:
    for name, data in [("l/layer.tar", l), ("manifest.json", json.dumps([{"Layers": ["l/layer.tar"]}]).encode())]:
        ti = tarfile.TarInfo(name); ti.size = len(data); out.addfile(ti, io.BytesIO(data))
EOF
  refused img "$img" ".wh."
}

@test "hostile archive: ../ entries" {
  pytar "$BATS_TEST_TMPDIR/h.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name in ["ok", "../outside/evil"]:
        ti = tarfile.TarInfo(name); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
EOF
  refused p "$BATS_TEST_TMPDIR/h.tar" "\`..\` is not allowed"
}

@test "hostile archive: absolute paths" {
  pytar "$BATS_TEST_TMPDIR/h.tar" "$outside/evil" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo(sys.argv[2]); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
EOF
  refused p "$BATS_TEST_TMPDIR/h.tar" "absolute paths are not allowed"
}

@test "hostile archive: a symlink, then a write through it" {
  for target in "$outside" ../outside ../../../../../../../.."$outside"; do
    pytar "$BATS_TEST_TMPDIR/h.tar" "$target" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("lnk"); ti.type = tarfile.SYMTYPE; ti.linkname = sys.argv[2]; t.addfile(ti)
    ti = tarfile.TarInfo("lnk/pwned"); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
EOF
    refused p "$BATS_TEST_TMPDIR/h.tar" "symlink"
  done
}

@test "hostile archive: a hard link to /etc/passwd" {
  before=$(stat -c %h /etc/passwd)
  for target in /etc/passwd ../../../../../../etc/passwd; do
    pytar "$BATS_TEST_TMPDIR/h.tar" "$target" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("pw"); ti.type = tarfile.LNKTYPE; ti.linkname = sys.argv[2]; t.addfile(ti)
EOF
    refused p "$BATS_TEST_TMPDIR/h.tar" "points outside the archive"
  done
  # Through a symlink the archive planted.
  pytar "$BATS_TEST_TMPDIR/h.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("e"); ti.type = tarfile.SYMTYPE; ti.linkname = "/etc"; t.addfile(ti)
    ti = tarfile.TarInfo("pw"); ti.type = tarfile.LNKTYPE; ti.linkname = "e/passwd"; t.addfile(ti)
EOF
  refused p "$BATS_TEST_TMPDIR/h.tar" "not a file extracted earlier"
  [ "$(stat -c %h /etc/passwd)" = "$before" ]
}

@test "hostile archive: a zip bomb stops at ESBX_IMPORT_MAX_BYTES" {
  head -c 64M /dev/zero >"$BATS_TEST_TMPDIR/zeros"
  (cd "$BATS_TEST_TMPDIR" && zip -q bomb.zip zeros)
  [ "$(stat -c %s "$BATS_TEST_TMPDIR/bomb.zip")" -lt 1048576 ]
  ESBX_IMPORT_MAX_BYTES=16M refused p "$BATS_TEST_TMPDIR/bomb.zip" \
    "archive expands beyond the 16 MiB limit"
}

@test "hostile archive: a huge sparse file fails up front at the default limit" {
  truncate -s 20G "$BATS_TEST_TMPDIR/sparse"
  tar -C "$BATS_TEST_TMPDIR" --sparse -cf "$BATS_TEST_TMPDIR/h.tar" sparse
  refused p "$BATS_TEST_TMPDIR/h.tar" "archive expands beyond the 8 GiB limit"
}

@test "hostile archive: bad names and device nodes" {
  pytar "$BATS_TEST_TMPDIR/utf8.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as t:
    ti = tarfile.TarInfo("caf\xe9"); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
EOF
  refused p "$BATS_TEST_TMPDIR/utf8.tar" "not valid UTF-8"
  pytar "$BATS_TEST_TMPDIR/ctl.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("a\nb"); ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
EOF
  refused p "$BATS_TEST_TMPDIR/ctl.tar" "control character"
  pytar "$BATS_TEST_TMPDIR/wh.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("d/.wh.secret"); t.addfile(ti)
EOF
  refused p "$BATS_TEST_TMPDIR/wh.tar" ".wh."
  pytar "$BATS_TEST_TMPDIR/dev.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("null"); ti.type = tarfile.CHRTYPE; ti.devmajor = 1; ti.devminor = 3; t.addfile(ti)
EOF
  refused p "$BATS_TEST_TMPDIR/dev.tar" "device nodes and sockets are not allowed"
}

@test "a file that is not an archive is refused" {
  echo "just text" >"$BATS_TEST_TMPDIR/notes.txt"
  refused p "$BATS_TEST_TMPDIR/notes.txt" "not a directory or an archive"
}
