/* SPDX-License-Identifier: Apache-2.0
 *
 * lazaret init AGENT [--profile NAME] [--image REF] [--print]
 *
 * Writes a commented starter profile for a coding agent into the
 * configuration file (created when missing), so that `lazaret run AGENT` in
 * a project starts the agent (docs/agents.md says why each line is there):
 *
 *   - a registry image with a Node.js the agents support (node:22), run as
 *     root inside (gVisor's root, not the host's);
 *   - /usr/local and /root persistent: the agent, installed by npm on the
 *     first run into /usr/local, stays;
 *   - the agent's own configuration directory as a profile volume under
 *     {profile_dir}, with the agent's variable pointing at it: its login and
 *     settings are kept across restarts and shared by every project;
 *   - the hosts the agent talks to, and the npm registry, in allow_hosts
 *     (strict DNS: nothing else resolves);
 *   - a default command that installs the agent once and starts it;
 *   - escalation enabled, with no rule: every host command is asked for.
 *
 * The new text is appended to the existing file and the whole result parsed
 * before it replaces the file atomically (fs/atomic.h); a v1 file, a
 * profile of the same name, or a file changed meanwhile are refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/error.h"
#include "common/options.h"
#include "common/util.h"
#include "config/grammar.h"
#include "config/schema.h"
#include "config/source.h"
#include "fs/atomic.h"

const char lz_usage_init[] =
    "Usage: lazaret [--config FILE] init AGENT [--profile NAME] [--image REF] [--print]\n"
    "\n"
    "Add a starter profile for a coding agent to the configuration file (created\n"
    "when missing): AGENT is claude (Claude Code), codex (Codex CLI), gemini\n"
    "(Gemini CLI) or opencode. Then, in a project: lazaret run AGENT\n"
    "\n"
    "Options:\n"
    "  --profile NAME  the profile's name (default: AGENT)\n"
    "  --image REF     the image (default: docker.io/library/node:22-bookworm); it\n"
    "                  needs Node.js >= 20 and npm, or the agent already installed\n"
    "  --print         print the profile instead of writing it\n";

#define DEFAULT_IMAGE "docker.io/library/node:22-bookworm"

typedef struct agent_recipe {
    const char *name;        /* lazaret init NAME */
    const char *title;       /* for the comments */
    const char *package;     /* npm package */
    const char *program;     /* what the package installs */
    const char *config_dir;  /* in the sandbox: the profile volume */
    const char *environment; /* body of the `environment` inline table */
    const char *key_env;     /* body of the commented `env` line */
    const char *hosts;       /* body of allow_hosts */
    const char *login;       /* how to log in, for the comment */
} agent_recipe;

/* Host lists as documented by each agent's vendor in 2026-12; `lazaret log
 * --denied` shows any other name the agent asks for, with the line to add. */
static const agent_recipe recipes[] = {
    { "claude", "Claude Code", "@anthropic-ai/claude-code", "claude", "/root/.claude",
      "CLAUDE_CONFIG_DIR = \"/root/.claude\", IS_SANDBOX = \"1\", DISABLE_AUTOUPDATER = \"1\"",
      "ANTHROPIC_API_KEY = \"env:ANTHROPIC_API_KEY\"",
      "\"api.anthropic.com\", \"console.anthropic.com\", \"claude.ai\", "
      "\"statsig.anthropic.com\", \"registry.npmjs.org\"",
      "run /login inside and open the URL it prints on this machine, or export "
      "ANTHROPIC_API_KEY and uncomment the env line" },
    { "codex", "Codex CLI", "@openai/codex", "codex", "/root/.codex",
      "CODEX_HOME = \"/root/.codex\"", "OPENAI_API_KEY = \"env:OPENAI_API_KEY\"",
      "\"api.openai.com\", \"auth.openai.com\", \"chatgpt.com\", \"registry.npmjs.org\"",
      "choose 'Sign in with ChatGPT' (device code) or export OPENAI_API_KEY and uncomment the "
      "env line" },
    { "gemini", "Gemini CLI", "@google/gemini-cli", "gemini", "/root/.gemini", "",
      "GEMINI_API_KEY = \"env:GEMINI_API_KEY\"",
      "\"generativelanguage.googleapis.com\", \"cloudcode-pa.googleapis.com\", "
      "\"oauth2.googleapis.com\", \"accounts.google.com\", \"www.googleapis.com\", "
      "\"registry.npmjs.org\"",
      "choose 'Login with Google' and open the URL it prints, or export GEMINI_API_KEY and "
      "uncomment the env line" },
    { "opencode", "opencode", "opencode-ai", "opencode", "/root/.local/share/opencode", "",
      "ANTHROPIC_API_KEY = \"env:ANTHROPIC_API_KEY\"",
      "\"opencode.ai\", \"models.dev\", \"api.anthropic.com\", \"api.openai.com\", "
      "\"registry.npmjs.org\"",
      "run `opencode auth login` inside, or export a provider's key and uncomment the env "
      "line" },
};

static const agent_recipe *recipe_named(const char *name)
{
    for (size_t i = 0; i < LZ_ARRAY_SIZE(recipes); i++)
        if (strcmp(recipes[i].name, name) == 0)
            return &recipes[i];
    return NULL;
}

/* The profile's TOML text (the caller frees it). */
static char *profile_text(const agent_recipe *a, const char *profile, const char *image)
{
    _cleanup_free_ char *environment =
        a->environment[0] ? lz_xasprintf("environment = { %s }\n", a->environment) : lz_xstrdup("");
    return lz_xasprintf(
        "\n"
        "# %s, written by `lazaret init %s` (docs/agents.md). In a project:\n"
        "#   lazaret run %s\n"
        "# Log in: %s.\n"
        "[profiles.%s]\n"
        "image = \"%s\"\n"
        "# npm installs the agent into /usr/local on the first run; /root keeps\n"
        "# shell history and caches.\n"
        "persistent_dirs = [\"/usr/local\", \"/root\"]\n"
        "# The agent's hosts and the npm registry; nothing else resolves (strict\n"
        "# DNS). `lazaret log --denied` names anything else it asks for.\n"
        "allow_hosts = [%s]\n"
        "%s"
        "# env = { %s }   # a secret: a reference to your environment, never a value\n"
        "command = [\"sh\", \"-c\", \"command -v %s >/dev/null 2>&1 || { echo 'lazaret: "
        "installing %s (once)' >&2; npm install -g --no-fund --no-audit %s >&2 || exit 125; "
        "}; exec %s \\\"$@\\\"\", \"%s\"]\n"
        "\n"
        "# The agent's login and settings: one directory for every project.\n"
        "[[profiles.%s.volumes]]\n"
        "host = \"{profile_dir}/config\"\n"
        "container = \"%s\"\n"
        "kind = \"directory\"\n"
        "access = \"read-write\"\n"
        "create = true\n"
        "\n"
        "# The agent may ask for a host command (lazaret-escalate); you approve\n"
        "# each one in its terminal. Rules here approve exact commands unasked.\n"
        "[profiles.%s.escalation]\n"
        "enabled = true\n"
        "auto_approve = []\n",
        a->title, a->name, profile, a->login, profile, image, a->hosts, environment, a->key_env,
        a->program, a->package, a->package, a->program, a->program, profile, a->config_dir,
        profile);
}

static int fail(lz_error *err)
{
    lz_error_report(err, stderr);
    lz_error_free(err);
    return LZ_EXIT_FAILURE;
}

/* The directory of `path` (absolute), created (0700) where missing, walked
 * from / without following a symbolic link. */
static int open_config_dir(const char *path, lz_error **err)
{
    _cleanup_free_ char *dir = lz_xstrdup(path);
    *strrchr(dir, '/') = '\0';
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return lz_error_set(err, errno, "cannot open /");
    for (char *p = dir + 1, *slash; p && *p; p = slash ? slash + 1 : NULL) {
        slash = strchr(p, '/');
        if (slash)
            *slash = '\0';
        int next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && mkdirat(fd, p, 0700) == 0)
            next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            close(fd);
            if (slash)
                *slash = '/';
            lz_error_set(err, e, "cannot open or create the directory %s", dir);
            lz_error_hint(err, "check that it is a directory of yours, not a symbolic link");
            return -1;
        }
        close(fd);
        fd = next;
        if (slash)
            *slash = '/';
    }
    return fd;
}

int lz_cmd_init(int argc, char **argv, const lz_global_options *g)
{
    enum { OPT_PROFILE, OPT_IMAGE, OPT_PRINT };
    static const lz_option options[] = {
        { "profile", 0, "NAME", OPT_PROFILE },
        { "image", 0, "REF", OPT_IMAGE },
        { "print", 0, NULL, OPT_PRINT },
    };
    const char *agent = NULL, *profile = NULL, *image = DEFAULT_IMAGE;
    bool print = false;
    lz_opt_parser p;
    lz_opt_init(&p, options, LZ_ARRAY_SIZE(options), argc, argv, 1);
    for (int o; (o = lz_opt_next(&p)) != LZ_OPT_DONE;) {
        if (o == LZ_OPT_ERROR)
            return lz_cli_usage_error("init", "%s", p.error);
        if (o == OPT_PROFILE)
            profile = p.value;
        else if (o == OPT_IMAGE)
            image = p.value;
        else if (o == OPT_PRINT)
            print = true;
        else if (!agent)
            agent = p.arg;
        else
            return lz_cli_usage_error("init", "unexpected argument '%s'", p.arg);
    }
    if (!agent)
        return lz_cli_usage_error("init", "missing AGENT (claude, codex, gemini or opencode)");
    const agent_recipe *a = recipe_named(agent);
    if (!a)
        return lz_cli_usage_error("init", "unknown agent '%s' (claude, codex, gemini or opencode)",
                                  agent);
    if (!profile)
        profile = a->name;
    if (!lz_profile_name_valid(profile))
        return lz_cli_usage_error("init",
                                  "'%s' is not a valid profile name (a letter or digit, then "
                                  "letters, digits, '.', '_' or '-'; at most 64)",
                                  profile);
    for (const char *c = image; *c; c++)
        if ((unsigned char) *c <= 0x20 || (unsigned char) *c >= 0x7f || *c == '"' || *c == '\\')
            return lz_cli_usage_error("init", "--image: not an image reference");
    _cleanup_free_ char *text = profile_text(a, profile, image);
    if (print) {
        fputs(text + 1, stdout);
        return fflush(stdout) == 0 ? LZ_EXIT_OK : LZ_EXIT_FAILURE;
    }

    lz_error *err = NULL;
    const char *home = getenv("HOME");
    const char *what = NULL;
    _cleanup_free_ char *home_n = home ? lz_env_path_normalize(home, &what) : NULL;
    if (!home_n) {
        lz_error_set(&err, 0, "HOME is not set to an absolute path");
        lz_error_hint(&err, "set HOME to your home directory");
        return fail(err);
    }
    _cleanup_free_ char *path = lz_config_source_select(g->config_path, home_n, &err);
    if (!path)
        return fail(err);
    lz_config_source src = { 0 };
    bool exists = access(path, F_OK) == 0;
    if (exists && lz_config_source_read(path, &src, &err) < 0)
        return fail(err);
    _cleanup_free_ char *old = exists ? lz_xstrdup(src.bytes)
                                      : lz_xstrdup("# Lazaret configuration (README.md "
                                                   "\"Writing config.toml\").\n"
                                                   "schema = \"" LZ_CONFIG_SCHEMA_ID_V2 "\"\n");
    lz_config_source_clear(&src);
    size_t n_old = strlen(old);
    bool newline = n_old > 0 && old[n_old - 1] != '\n';
    _cleanup_free_ char *updated = lz_xasprintf("%s%s%s", old, newline ? "\n" : "", text);
    lz_config_doc *doc = NULL;
    if (lz_config_doc_parse(updated, strlen(updated), path, &doc, &err) == 0) {
        lz_config_doc_free(doc);
    } else {
        /* Say why, from the file as it is: a v1 file, a profile of that
         * name, or an error of its own (a file with no profile yet is fine:
         * the new text completes it). */
        lz_error *why = NULL;
        if (lz_config_doc_parse(old, n_old, path, &doc, &why) < 0) {
            lz_error_free(err);
            lz_error_prefix(&why, "the configuration is not valid as it is; nothing was written");
            return fail(why);
        }
        bool v1 = doc->schema_version != 2, taken = lz_config_doc_profile(doc, profile) != NULL;
        lz_config_doc_free(doc);
        if (v1 || taken)
            lz_error_free(lz_error_take(&err));
        if (v1) {
            lz_error_set(&err, 0, "%s is a v1 configuration; the starter profile needs v2", path);
            lz_error_hint(&err,
                          "change its schema line to schema = \"" LZ_CONFIG_SCHEMA_ID_V2
                          "\" (a v1 file loads unchanged as v2: README.md), then run lazaret "
                          "init %s again",
                          agent);
        } else if (taken) {
            lz_error_set(&err, 0, "%s already has a profile '%s'; nothing was written", path,
                         profile);
            lz_error_hint(&err, "choose another name: lazaret init %s --profile %s-2", agent,
                          profile);
        } else {
            lz_error_prefix(&err, "the configuration with the new profile would not load; "
                                  "nothing was written");
        }
        return fail(err);
    }

    int dir = open_config_dir(path, &err);
    if (dir < 0)
        return fail(err);
    /* The file must still be what was read (an editor may have saved it). */
    if (exists) {
        lz_config_source again = { 0 };
        bool same = lz_config_source_read(path, &again, &err) == 0 && strcmp(again.bytes, old) == 0;
        lz_config_source_clear(&again);
        if (!same) {
            close(dir);
            lz_error_free(lz_error_take(&err));
            lz_error_set(&err, 0, "%s changed while lazaret init ran; nothing was written", path);
            lz_error_hint(&err, "run lazaret init %s again", agent);
            return fail(err);
        }
    }
    int r = lz_write_atomic(dir, strrchr(path, '/') + 1, updated, strlen(updated), 0600, 0,
                            "the configuration file", &err);
    close(dir);
    if (r < 0)
        return fail(err);
    printf("lazaret: added profile '%s' (%s) to %s\n"
           "Next, in your project:  lazaret run %s\n"
           "Log in: %s.\n",
           profile, a->title, path, profile, a->login);
    return LZ_EXIT_OK;
}
