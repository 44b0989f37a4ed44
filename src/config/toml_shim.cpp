// SPDX-License-Identifier: Apache-2.0
//
// The one C++ file of Lazaret: a C ABI over toml++ (see toml.h for why).
// It converts toml++'s document into the owned C tree of toml.h and does
// nothing else. Unreleased TOML 1.1 syntax stays disabled (toml++'s default,
// asserted below), so only TOML 1.0 documents are accepted.

#include "config/toml.h"

extern "C" {
#include "common/text.h"
#include "common/util.h"
}

#include <toml++/toml.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

static_assert(!TOML_ENABLE_UNRELEASED_FEATURES, "TOML 1.1-only syntax must stay disabled");

namespace
{

// Bounds on nesting. toml++ limits nested arrays and inline tables but not
// dotted keys or table headers (`a.a.a…` with 50,000 parts overflows its
// stack inside toml::parse), and convert() below recurses per level.
constexpr size_t kMaxKeyParts = 64;
constexpr unsigned kMaxDepth = 1024; // toml++ stops arrays/inline tables at 256

// A conservative pre-scan: outside strings and comments, count the dots
// between separators ('=', ',', '{', '}', '[', newline). A key with more than
// kMaxKeyParts parts is refused before toml++ sees it. Values rarely contain
// more than one bare dot between separators (1.5, a date-time), so nothing a
// real configuration writes comes near the bound.
bool key_parts_within_bound(std::string_view s, unsigned *line_out)
{
    size_t dots = 0;
    unsigned line = 1;
    size_t i = 0, n = s.size();
    while (i < n) {
        char c = s[i];
        if (c == '\n') {
            line++;
            dots = 0;
            i++;
        } else if (c == '#') {
            while (i < n && s[i] != '\n')
                i++;
        } else if (c == '"' || c == '\'') {
            bool multi = i + 2 < n && s[i + 1] == c && s[i + 2] == c;
            bool basic = c == '"';
            i += multi ? 3 : 1;
            while (i < n) {
                if (basic && s[i] == '\\') {
                    i += 2;
                    continue;
                }
                if (s[i] == '\n') {
                    line++;
                    if (!multi)
                        break; // unterminated: toml++ reports it
                }
                if (s[i] == c && (!multi || (i + 2 < n && s[i + 1] == c && s[i + 2] == c))) {
                    i += multi ? 3 : 1;
                    break;
                }
                i++;
            }
        } else {
            if (c == '.' && ++dots > kMaxKeyParts) {
                *line_out = line;
                return false;
            }
            if (c == '=' || c == ',' || c == '{' || c == '}' || c == '[' || c == ']')
                dots = 0;
            i++;
        }
    }
    return true;
}

struct bad_content {
    unsigned line, column;
    const char *what;
};

void set_pos(lz_toml_node *n, const toml::source_region &src)
{
    n->line = src.begin.line;
    n->column = src.begin.column;
}

char *dup_checked(std::string_view s, const toml::source_region &src, const char *what)
{
    if (s.find('\0') != std::string_view::npos)
        throw bad_content{ src.begin.line, src.begin.column, what };
    char *d = static_cast<char *>(std::malloc(s.size() + 1));
    if (!d)
        throw std::bad_alloc();
    std::memcpy(d, s.data(), s.size());
    d[s.size()] = '\0';
    return d;
}

lz_toml_node *new_node(lz_toml_type t)
{
    auto *n = static_cast<lz_toml_node *>(std::calloc(1, sizeof(lz_toml_node)));
    if (!n)
        throw std::bad_alloc();
    n->type = t;
    return n;
}

// Owns a partially built tree while conversion may still throw.
struct tree_guard {
    lz_toml_node *n;
    ~tree_guard()
    {
        lz_toml_free(n);
    }
};

lz_toml_node *convert(const toml::node &src, unsigned depth);

void check_depth(const toml::node &n, unsigned depth)
{
    if (depth > kMaxDepth)
        throw bad_content{ n.source().begin.line, n.source().begin.column,
                           "tables and arrays nested too deeply" };
}

lz_toml_node *convert_table(const toml::table &t, unsigned depth)
{
    check_depth(t, depth);
    tree_guard g{ new_node(LZ_TOML_TABLE) };
    set_pos(g.n, t.source());
    size_t count = t.size();
    if (count) {
        g.n->u.table.entries =
            static_cast<lz_toml_entry *>(std::calloc(count, sizeof(lz_toml_entry)));
        if (!g.n->u.table.entries)
            throw std::bad_alloc();
    }
    // toml::table iterates in key order (std::map); count grows as we fill so
    // that lz_toml_free() only sees initialised entries.
    for (auto &&[k, v] : t) {
        lz_toml_entry &e = g.n->u.table.entries[g.n->u.table.count];
        e.key = dup_checked(k.str(), k.source(), "NUL character in a key");
        e.line = k.source().begin.line;
        e.column = k.source().begin.column;
        g.n->u.table.count++;
        e.value = convert(v, depth + 1);
    }
    lz_toml_node *out = g.n;
    g.n = nullptr;
    return out;
}

lz_toml_node *convert_array(const toml::array &a, unsigned depth)
{
    check_depth(a, depth);
    tree_guard g{ new_node(LZ_TOML_ARRAY) };
    set_pos(g.n, a.source());
    size_t count = a.size();
    if (count) {
        g.n->u.array.items =
            static_cast<lz_toml_node **>(std::calloc(count, sizeof(lz_toml_node *)));
        if (!g.n->u.array.items)
            throw std::bad_alloc();
    }
    for (const toml::node &v : a) {
        g.n->u.array.items[g.n->u.array.count] = convert(v, depth + 1);
        g.n->u.array.count++;
    }
    lz_toml_node *out = g.n;
    g.n = nullptr;
    return out;
}

lz_toml_node *convert(const toml::node &src, unsigned depth)
{
    switch (src.type()) {
    case toml::node_type::table:
        return convert_table(*src.as_table(), depth);
    case toml::node_type::array:
        return convert_array(*src.as_array(), depth);
    default:
        break;
    }
    tree_guard g{ nullptr };
    switch (src.type()) {
    case toml::node_type::string: {
        g.n = new_node(LZ_TOML_STRING);
        const std::string &s = src.as_string()->get();
        g.n->u.string.bytes = dup_checked(s, src.source(), "NUL character in a string");
        g.n->u.string.len = s.size();
        break;
    }
    case toml::node_type::integer:
        g.n = new_node(LZ_TOML_INTEGER);
        g.n->u.integer = src.as_integer()->get();
        break;
    case toml::node_type::floating_point:
        g.n = new_node(LZ_TOML_FLOAT);
        g.n->u.floating = src.as_floating_point()->get();
        break;
    case toml::node_type::boolean:
        g.n = new_node(LZ_TOML_BOOLEAN);
        g.n->u.boolean = src.as_boolean()->get();
        break;
    case toml::node_type::date:
        g.n = new_node(LZ_TOML_DATE);
        break;
    case toml::node_type::time:
        g.n = new_node(LZ_TOML_TIME);
        break;
    case toml::node_type::date_time:
        g.n = new_node(LZ_TOML_DATETIME);
        break;
    default:
        throw bad_content{ src.source().begin.line, src.source().begin.column,
                           "unsupported TOML value" };
    }
    set_pos(g.n, src.source());
    lz_toml_node *out = g.n;
    g.n = nullptr;
    return out;
}

// The parser's message may quote document bytes (control characters, a
// newline). Escape everything but printable ASCII and whole UTF-8 sequences,
// and never cut a sequence in half.
void set_diag(lz_toml_diag *diag, unsigned line, unsigned column, std::string_view msg)
{
    if (!diag)
        return;
    diag->line = line;
    diag->column = column;
    size_t o = 0, cap = sizeof(diag->message) - 1;
    for (size_t i = 0; i < msg.size();) {
        unsigned char c = static_cast<unsigned char>(msg[i]);
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        bool whole = len > 1 && i + len <= msg.size();
        for (size_t k = 1; whole && k < len; k++)
            whole = (static_cast<unsigned char>(msg[i + k]) & 0xC0) == 0x80;
        if (len == 1 && c >= 0x20 && c != 0x7f) {
            if (o + 1 > cap)
                break;
            diag->message[o++] = static_cast<char>(c);
            i++;
        } else if (whole && lz_utf8_valid(msg.data() + i, len)) {
            if (o + len > cap)
                break;
            std::memcpy(diag->message + o, msg.data() + i, len);
            o += len;
            i += len;
        } else {
            if (o + 4 > cap)
                break;
            static const char hex[] = "0123456789abcdef";
            diag->message[o++] = '\\';
            diag->message[o++] = 'x';
            diag->message[o++] = hex[c >> 4];
            diag->message[o++] = hex[c & 15];
            i++;
        }
    }
    diag->message[o] = '\0';
}

} // namespace

extern "C" int lz_toml_parse(const char *buf, size_t len, lz_toml_node **ret_root,
                             lz_toml_diag *diag)
{
    try {
        unsigned deep_line = 0;
        if (!key_parts_within_bound(std::string_view(buf, len), &deep_line)) {
            set_diag(diag, deep_line, 0, "a key has too many dotted parts");
            return -1;
        }
        toml::table doc = toml::parse(std::string_view(buf, len));
        *ret_root = convert_table(doc, 0);
        return 0;
    } catch (const toml::parse_error &e) {
        set_diag(diag, e.source().begin.line, e.source().begin.column, e.description());
    } catch (const bad_content &e) {
        set_diag(diag, e.line, e.column, e.what);
    } catch (const std::bad_alloc &) {
        set_diag(diag, 0, 0, "out of memory");
    } catch (...) {
        set_diag(diag, 0, 0, "internal TOML reader failure");
    }
    return -1;
}

extern "C" void lz_toml_free(lz_toml_node *n)
{
    if (!n)
        return;
    switch (n->type) {
    case LZ_TOML_TABLE:
        for (size_t i = 0; i < n->u.table.count; i++) {
            std::free(n->u.table.entries[i].key);
            lz_toml_free(n->u.table.entries[i].value);
        }
        std::free(n->u.table.entries);
        break;
    case LZ_TOML_ARRAY:
        for (size_t i = 0; i < n->u.array.count; i++)
            lz_toml_free(n->u.array.items[i]);
        std::free(n->u.array.items);
        break;
    case LZ_TOML_STRING:
        std::free(n->u.string.bytes);
        break;
    default:
        break;
    }
    std::free(n);
}

extern "C" const lz_toml_node *lz_toml_get(const lz_toml_node *t, const char *key)
{
    if (!t || t->type != LZ_TOML_TABLE)
        return nullptr;
    for (size_t i = 0; i < t->u.table.count; i++)
        if (std::strcmp(t->u.table.entries[i].key, key) == 0)
            return t->u.table.entries[i].value;
    return nullptr;
}

extern "C" const char *lz_toml_type_name(lz_toml_type t)
{
    switch (t) {
    case LZ_TOML_TABLE:
        return "table";
    case LZ_TOML_ARRAY:
        return "array";
    case LZ_TOML_STRING:
        return "string";
    case LZ_TOML_INTEGER:
        return "integer";
    case LZ_TOML_FLOAT:
        return "float";
    case LZ_TOML_BOOLEAN:
        return "boolean";
    case LZ_TOML_DATE:
        return "date";
    case LZ_TOML_TIME:
        return "time";
    case LZ_TOML_DATETIME:
        return "date-time";
    }
    return "value";
}
