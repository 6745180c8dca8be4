// --help and the README's table of flags, both made from the flag table.
// Main thread, before anything starts.
#include <string>

#include "app/flags.hpp"

namespace m0::app {

namespace {

// --help's columns: the flag at 2, its text at 30.
constexpr size_t kIndent = 2, kTextColumn = 30;

// A flag's help, {default} replaced by its default without Markdown's backticks.
std::string help_text(const Flag& f) {
    std::string shown;
    for (char c : f.default_shown())
        if (c != '`') shown += c;
    std::string out(f.help);
    const std::string_view mark = "{default}";
    for (size_t at = out.find(mark); at != std::string::npos; at = out.find(mark, at))
        out.replace(at, mark.size(), shown), at += shown.size();
    return out;
}

}  // namespace

std::string usage() {
    std::string out = "usage: m0serve [options] [APP]\n\n";
    for (const Flag& f : flags()) {
        std::string left(kIndent, ' ');
        if (f.kind == Flag::positional) {
            left += f.name;
        } else {
            left += "--" + std::string(f.name);
            if (!f.metavar.empty()) left += " " + std::string(f.metavar);
        }
        // A flag too long for its column has its text on the next line.
        if (left.size() < kTextColumn)
            left.resize(kTextColumn, ' ');
        else
            left += "\n" + std::string(kTextColumn, ' ');
        out += left;
        for (char c : help_text(f)) {
            out += c;
            if (c == '\n') out += std::string(kTextColumn, ' ');
        }
        out += "\n";
    }
    return out;
}

std::string flags_markdown() {
    std::string out = "| flag | default | meaning |\n|---|---|---|\n";
    for (const Flag& f : flags()) {
        std::string flag;
        if (f.kind == Flag::positional) {
            flag = "`" + std::string(f.name) + "` (positional)";
        } else {
            // HOST:PORT|unix:PATH: "`--listen HOST:PORT` or `unix:PATH`".
            std::string metavar(f.metavar);
            for (size_t bar = metavar.find('|'); bar != std::string::npos;
                 bar = metavar.find('|', bar))
                metavar.replace(bar, 1, "` or `");
            flag = "`--" + std::string(f.name) + (metavar.empty() ? "" : " " + metavar) + "`";
        }
        out += "|";
        for (const std::string& cell : {flag, f.default_shown(), std::string(f.doc)})
            out += cell.empty() ? " |" : " " + cell + " |";
        out += "\n";
    }
    return out;
}

}  // namespace m0::app
