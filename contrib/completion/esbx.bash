# bash completion for esbx: verbs, each verb's options, and live names
# (projects, sessions, layers of a project, tokens, trash entries) read with
# esbx itself, so from the store or, when ESBX_HOST is set, the gateway.
# The verbs and options come from `esbx --help` and `esbx VERB --help`: the
# one source of the usage, the manual page and this completion.
# shellcheck shell=bash

# The first column of `esbx ARGS`' table, without its header.
_esbx_column() {
  "${_esbx_cmd[@]}" "$@" 2>/dev/null | awk 'NR > 1 {print $1}'
}

_esbx_projects() { _esbx_column project list; }
_esbx_sessions() { _esbx_column session list; }
_esbx_tokens() { _esbx_column token list; }
_esbx_trash() { _esbx_column trash list; }
_esbx_layers() { _esbx_column project log "$1"; }

# The options of the verb's usage in `esbx VERB --help`, and --json and
# --help, which every verb takes (the global --root and --host do not go
# after the verb).
_esbx_options() {
  {
    "${_esbx_cmd[@]}" "$1" --help 2>/dev/null | sed '/^global options/,$d' |
      grep -oE -- '--[a-z][a-z-]*|(^|[[ |])-[a-zA-Z]([]| ]|$)' | tr -d '[] |'
    printf '%s\n' --json --help
  } | sort -u
}

_esbx_verbs() {
  "${_esbx_cmd[@]}" --help 2>/dev/null | awk '$1 == "esbx" {print $2}' | sort -u
}

# COMPREPLY: the words of $1 that start with $cur (of _esbx), each prefixed
# with $2.
_esbx_reply() {
  mapfile -t COMPREPLY < <(compgen -P "${2:-}" -W "$1" -- "${cur#"${2:-}"}")
}

_esbx() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -n @= || return
  else
    cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
  fi
  # esbx itself, with the global options given before the verb (--root,
  # --host): names are read where the command will run.
  local -a _esbx_cmd=("${words[0]}")
  local i=1 verb='' sub=''
  while [ "$i" -lt "$cword" ]; do
    case ${words[i]} in
    --root | --host | --ca) _esbx_cmd+=("${words[i]}" "${words[i + 1]}"); i=$((i + 2)); continue ;;
    --root=* | --host=* | --ca=*) _esbx_cmd+=("${words[i]}") ;;
    -*) ;;
    *) verb=${words[i]}; break ;;
    esac
    i=$((i + 1))
  done
  # The words after the verb that are not options: the arguments so far.
  local -a args=()
  local j
  for ((j = i + 1; j < cword; j++)); do
    [[ ${words[j]} == -* ]] || args+=("${words[j]}")
  done
  sub=${args[0]:-}

  case $prev in
  --root | --from | -o | --output | --workspace | --rootfs | --cwd | --ca)
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return
    ;;
  --host) _esbx_reply "unix:///run/esbx/gateway.sock https://127.0.0.1: tcp://127.0.0.1:"; return ;;
  --format) _esbx_reply "tar oci-layer"; return ;;
  --network) _esbx_reply "none host"; return ;;
  --scope) _esbx_reply "manage runtime observe"; return ;;
  --project) _esbx_reply "$(_esbx_projects)"; return ;;
  --session) _esbx_reply "$(_esbx_sessions)"; return ;;
  --base)
    local p j2
    for ((j2 = i + 1; j2 < cword; j2++)); do
      [ "${words[j2]}" = create ] && p=${words[j2 + 1]}
    done
    [ -n "${p:-}" ] && _esbx_reply "$(_esbx_layers "$p")"
    return
    ;;
  --name | -m | --message | --label | --env | --user | --memory | --pids | --cpus | --tmpfs-size | --shm-size | --disk | --ttl | --log-limit)
    return
    ;;
  esac

  if [ -z "$verb" ]; then
    if [[ $cur == -* ]]; then
      _esbx_reply "--root --host --ca --json --progress --quiet --help --version"
    else
      _esbx_reply "$(_esbx_verbs)"
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    _esbx_reply "$(_esbx_options "$verb")"
    return
  fi

  local n=${#args[@]} words_=''
  case $verb in
  project)
    case $n in
    0) words_="create list log rm squash git-dir push-git pull-git" ;;
    1) [[ $sub == @(log|rm|squash|git-dir|push-git|pull-git) ]] && words_=$(_esbx_projects) ;;
    esac
    ;;
  session)
    case $n in
    0) words_="create list inspect path stop" ;;
    1)
      case $sub in
      create) words_=$(_esbx_projects) ;;
      inspect | path | stop) words_=$(_esbx_sessions) ;;
      esac
      ;;
    esac
    ;;
  diff | publish | rebase | discard | ps | events)
    [ "$n" -eq 0 ] && words_=$(_esbx_sessions)
    ;;
  exec)
    [ "$n" -eq 0 ] && words_=$(_esbx_sessions)
    ;;
  blame | fsck)
    [ "$n" -eq 0 ] && words_=$(_esbx_projects)
    ;;
  export)
    if [ "$n" -eq 0 ]; then
      if [[ $cur == *@* ]]; then
        local project=${cur%%@*}
        _esbx_reply "$(_esbx_layers "$project")" "$project@"
        return
      fi
      words_="$(_esbx_sessions) $(_esbx_projects)"
    fi
    ;;
  token)
    case $n in
    0) words_="create list revoke" ;;
    1) [ "$sub" = revoke ] && words_=$(_esbx_tokens) ;;
    esac
    ;;
  trash)
    case $n in
    0) words_="list restore purge ttl" ;;
    1) [[ $sub == @(restore|purge) ]] && words_=$(_esbx_trash) ;;
    esac
    ;;
  help)
    [ "$n" -eq 0 ] && words_=$(_esbx_verbs)
    ;;
  esac
  _esbx_reply "$words_"
}

complete -F _esbx esbx
