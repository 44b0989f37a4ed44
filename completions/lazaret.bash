# bash completion for lazaret(1)                      -*- shell-script -*-
# SPDX-License-Identifier: Apache-2.0
# Installed as share/bash-completion/completions/lazaret. Profile names are
# completed from the [profiles.NAME] table headers of the configuration
# file, read with sed: nothing is executed and no value is printed.

_lazaret_profiles()
{
    local cfg=${XDG_CONFIG_HOME:-$HOME/.config}/lazaret/config.toml i
    for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
        [[ ${COMP_WORDS[i]} == --config ]] && cfg=${COMP_WORDS[i + 1]}
    done
    [[ -r $cfg ]] || return
    sed -n 's/^[[:space:]]*\[profiles\.\([A-Za-z0-9_-]*\)\][[:space:]]*\(#.*\)\{0,1\}$/\1/p' "$cfg"
}

_lazaret()
{
    local cur prev words cword
    _init_completion || return

    local commands="run init stop status log state image config export doctor help version"
    local i cmd="" sub=""
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --config) ((i++)) ;;
            -*) ;;
            *)
                if [[ -z $cmd ]]; then
                    cmd=${words[i]}
                elif [[ -z $sub ]]; then
                    sub=${words[i]}
                fi
                ;;
        esac
    done

    case $prev in
        --config) _filedir toml; return ;;
        --workspace) _filedir -d; return ;;
        --profile) COMPREPLY=($(compgen -W "$(_lazaret_profiles)" -- "$cur")); return ;;
        --publish) return ;;
    esac

    # After "--" everything is the sandboxed command's.
    for ((i = 1; i < cword; i++)); do
        [[ ${words[i]} == -- ]] && return
    done

    case $cmd in
        "")
            COMPREPLY=($(compgen -W "$commands --config --help --version" -- "$cur")) ;;
        run)
            if [[ -z $sub && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "$(_lazaret_profiles)" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--workspace --publish --env -e --help --" -- "$cur"))
            fi ;;
        init)
            if [[ -z $sub && $cur != -* ]]; then
                COMPREPLY=($(compgen -W "claude codex gemini opencode" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "--profile --image --print --help" -- "$cur"))
            fi ;;
        stop)
            COMPREPLY=($(compgen -W "--profile --workspace --help" -- "$cur")) ;;
        status)
            COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        log)
            COMPREPLY=($(compgen -W "--profile --workspace --denied --json --follow --help" \
                -- "$cur")) ;;
        state)
            case $sub in
                "") COMPREPLY=($(compgen -W "list inspect verify reset fix-ownership --help" -- "$cur")) ;;
                list) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
                inspect | verify)
                    COMPREPLY=($(compgen -W "--profile --workspace --json --help" -- "$cur")) ;;
                reset)
                    COMPREPLY=($(compgen -W "--profile --workspace --json --stop --yes --help" \
                        -- "$cur")) ;;
                fix-ownership)
                    COMPREPLY=($(compgen -W "--profile --workspace --json --stop --help" \
                        -- "$cur")) ;;
            esac ;;
        image)
            case $sub in
                "") COMPREPLY=($(compgen -W "list prune --help" -- "$cur")) ;;
                list) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
                prune) COMPREPLY=($(compgen -W "--dry-run --yes --help" -- "$cur")) ;;
            esac ;;
        config)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "check --help" -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--workspace --json --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_lazaret_profiles)" -- "$cur"))
            fi ;;
        export)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "kubernetes --help" -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--workspace -o --output --name --namespace \
                    --runtime-class --with-runtime-class --storage-class --workspace-size \
                    --persistent-size --image --image-digest --git-readonly --run-as-user \
                    --memory --ephemeral-storage --no-cluster-dns --template --warm-pool \
                    --report --strict --accept --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_lazaret_profiles)" -- "$cur"))
            fi ;;
        help)
            [[ -z $sub ]] && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
        doctor | version)
            COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
    esac
}
complete -F _lazaret lazaret
