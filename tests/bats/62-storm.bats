#!/usr/bin/env bats
# Publish storm (issue 7): 32 sessions of one project publish at once, half of
# them in pairs that change the same file on purpose, 20 rounds
# (ESBX_STORM_ROUNDS=N for quick runs).  Every round: all 16 independent
# sessions land, exactly one of each overlapping pair lands, every loser exits
# 3, names its conflicting path and the winner's layer and session, and keeps
# its changes; the project's tree equals a model the test keeps by itself.

load helpers

SESSIONS=32
PAIRS=8

setup() {
  setup_store
  model=$BATS_TEST_TMPDIR/model
  mkdir -p "$model/uniq" "$model/hot"
  for i in $(seq 0 $((SESSIONS - 1))); do echo "base $i" >"$model/uniq/f$i"; done
  for k in $(seq 0 $((PAIRS - 1))); do echo "hot base $k" >"$model/hot/p$k"; done
  esbx_ok project create storm --from "$model"
}

# Round R: create, change, publish all at once, check, discard.
storm_round() {
  local r=$1 i k a b out=$BATS_TEST_TMPDIR/out
  local -a sess path
  rm -rf "$out"
  mkdir -p "$out"
  # Sessions are created concurrently too.
  for i in $(seq 0 $((SESSIONS - 1))); do
    "$ESBX" session create storm --label "storm=$r-$i" >"$out/$i.name" 2>"$out/$i.cerr" &
  done
  wait
  for i in $(seq 0 $((SESSIONS - 1))); do
    sess[i]=$(cat "$out/$i.name")
    [ -n "${sess[i]}" ] || { echo "round $r: session create $i: $(cat "$out/$i.cerr")"; return 1; }
    path[i]=$("$ESBX" session path "${sess[i]}") || return 1
    m=${path[i]}
    # Everyone adds a file of its own and modifies one that only it touches.
    echo "round $r session $i" >"$m/own-r$r-s$i"
    echo "round $r by $i" >>"$m/uniq/f$i"
    if [ "$i" -ge 16 ]; then
      # Sessions 16+2k and 17+2k both rewrite hot/pk, differently.
      echo "round $r winner candidate $i" >"$m/hot/p$(((i - 16) / 2))"
    fi
  done
  for i in $(seq 0 $((SESSIONS - 1))); do
    ("$ESBX" --json publish "${sess[i]}" >"$out/$i.json" 2>"$out/$i.err"
     echo $? >"$out/$i.rc") &
  done
  wait

  # The independent half all landed.
  for i in $(seq 0 15); do
    [ "$(cat "$out/$i.rc")" -eq 0 ] || { echo "round $r: session $i exited $(cat "$out/$i.rc"): $(cat "$out/$i.err")"; return 1; }
    cp "${path[i]}/own-r$r-s$i" "$model/"
    cp "${path[i]}/uniq/f$i" "$model/uniq/f$i"
  done
  # Exactly one of each pair.
  for k in $(seq 0 $((PAIRS - 1))); do
    a=$((16 + 2 * k)) b=$((17 + 2 * k))
    local ra rb win lose
    ra=$(cat "$out/$a.rc") rb=$(cat "$out/$b.rc")
    if [ "$ra" -eq 0 ] && [ "$rb" -eq 3 ]; then win=$a lose=$b
    elif [ "$ra" -eq 3 ] && [ "$rb" -eq 0 ]; then win=$b lose=$a
    else
      echo "round $r pair $k: exit statuses $ra and $rb, want one 0 and one 3"
      cat "$out/$a.err" "$out/$b.err"
      return 1
    fi
    # The loser names the path, the winner's layer and the winner's session.
    local layer
    layer=$(jq -r .layer "$out/$win.json")
    jq -e --arg p "/hot/p$k" --arg l "$layer" --arg s "${sess[win]}" \
      'any(.conflicts[]; .path == $p and .layer == $l and .session == $s)' "$out/$lose.json" >/dev/null ||
      { echo "round $r pair $k: conflict report $(cat "$out/$lose.json") lacks /hot/p$k in $layer by ${sess[win]}"; return 1; }
    # Only that path conflicts; everything else of the loser is still there.
    [ "$(jq '.conflicts | length' "$out/$lose.json")" -eq 1 ] ||
      { echo "round $r: more conflicts than /hot/p$k: $(cat "$out/$lose.json")"; return 1; }
    "$ESBX" diff --json "${sess[lose]}" >"$out/diff.json" || return 1
    for p in "/own-r$r-s$lose" "/uniq/f$lose" "/hot/p$k"; do
      jq -e --arg p "$p" 'any(.[]; .path == $p)' "$out/diff.json" >/dev/null ||
        { echo "round $r: the rejected session $lose lost $p"; return 1; }
    done
    grep -qx "round $r winner candidate $lose" "${path[lose]}/hot/p$k" ||
      { echo "round $r: the rejected session $lose lost its content of /hot/p$k"; return 1; }
    # The model takes the winner's changes.
    m=${path[win]}
    cp "$m/own-r$r-s$win" "$model/"
    cp "$m/uniq/f$win" "$model/uniq/f$win"
    cp "$m/hot/p$k" "$model/hot/p$k"
  done
  # 24 new layers, no more.
  [ "$(wc -l <"$ESBX_ROOT/projects/storm/stack")" -eq $((start_layers + 24 * (r + 1))) ] ||
    { echo "round $r: $(wc -l <"$ESBX_ROOT/projects/storm/stack") layers"; return 1; }

  # The project's tree equals the model.
  rm -rf "$BATS_TEST_TMPDIR/got" "$BATS_TEST_TMPDIR/got.tar"
  mkdir -p "$BATS_TEST_TMPDIR/got"
  "$ESBX" export storm -o "$BATS_TEST_TMPDIR/got.tar" >/dev/null || return 1
  tar -xf "$BATS_TEST_TMPDIR/got.tar" -C "$BATS_TEST_TMPDIR/got" || return 1
  diff -r "$model" "$BATS_TEST_TMPDIR/got" || { echo "round $r: the tree differs from the model"; return 1; }

  for i in $(seq 0 $((SESSIONS - 1))); do
    "$ESBX" discard "${sess[i]}" >/dev/null 2>"$out/$i.derr" || echo "discard ${sess[i]}: $(cat "$out/$i.derr")" >"$out/discard-failed" &
  done
  wait
  [ ! -e "$out/discard-failed" ] || { cat "$out/discard-failed"; return 1; }
}

@test "publish storm: 32 sessions at once, half overlapping in pairs, 20 rounds" {
  local rounds=${ESBX_STORM_ROUNDS:-20} r t0=$SECONDS
  start_layers=$(wc -l <"$ESBX_ROOT/projects/storm/stack")
  for ((r = 0; r < rounds; r++)); do
    run storm_round "$r"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
  done
  esbx_ok fsck storm
  echo "# storm: $rounds rounds, $((rounds * 24)) publishes landed, $((rounds * 8)) rejected, $((SECONDS - t0)) s" >&3
}
