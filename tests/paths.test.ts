import { describe, expect, test } from "bun:test";
import { dirname } from "node:path";
import fc from "fast-check";
import { toolPaths } from "../plugin/host/tool-paths.ts";
import { throughDotGit } from "../plugin/paths.ts";

const root = "/repo";
/** The directories a call names: a file's directory, or the directory itself (what a walk starts from for paths that exist as named). */
const dirs = (tool: string, args: unknown, sessionDir = root) => [
  ...new Set(toolPaths(tool, args, sessionDir, root).map(({ path, isFile }) => (isFile ? dirname(path) : path))),
];

describe("toolPaths", () => {
  test("read, edit and write name a file: its directory is touched", () => {
    expect(dirs("read", { filePath: "/repo/a/b/file.ts" })).toEqual(["/repo/a/b"]);
    expect(dirs("edit", { filePath: "a/x.ts", oldString: "1", newString: "2" })).toEqual(["/repo/a"]);
    expect(dirs("write", { filePath: "new/dir/x.ts", content: "" })).toEqual(["/repo/new/dir"]);
  });

  test("glob, grep and list name a directory; bash names its workdir", () => {
    expect(dirs("glob", { pattern: "**/*.ts", path: "packages/web" })).toEqual(["/repo/packages/web"]);
    expect(dirs("grep", { pattern: "x", path: "/repo/services", include: "*.ts" })).toEqual(["/repo/services"]);
    expect(dirs("list", { path: "docs" })).toEqual(["/repo/docs"]);
    expect(dirs("bash", { command: "ls", workdir: "/repo/tools" })).toEqual(["/repo/tools"]);
  });

  test("apply_patch headers: added, updated, deleted and moved files", () => {
    const patchText = [
      "*** Begin Patch",
      "*** Add File: a/new.ts",
      "+x",
      "*** Update File: b/old.ts",
      "*** Move to: c/moved.ts",
      "@@",
      "*** Delete File: /repo/d/gone.ts",
      "*** End Patch",
    ].join("\n");
    expect(dirs("apply_patch", { patchText })).toEqual(["/repo/a", "/repo/b", "/repo/c", "/repo/d"]);
  });

  test("any other tool's path-like arguments count, arrays included", () => {
    expect(dirs("custom", { paths: ["x", "y"], files: ["z/f.md"], cwd: "w", directory: "v", file: "u/f" })).toEqual([
      "/repo/u",
      "/repo/z",
      "/repo/x",
      "/repo/y",
      "/repo/w",
      "/repo/v",
    ]);
  });

  test("the snake_case and short spellings other tools use count too", () => {
    expect(dirs("mcp_edit", { file_path: "a/f.ts" })).toEqual(["/repo/a"]);
    expect(dirs("mcp_read", { filepath: "b/f.ts" })).toEqual(["/repo/b"]);
    expect(dirs("mcp_list", { dir: "c" })).toEqual(["/repo/c"]);
  });

  test("relative paths resolve against the session directory", () => {
    expect(dirs("read", { filePath: "../b/f.ts" }, "/repo/a")).toEqual(["/repo/b"]);
  });

  test("paths outside the worktree, URLs, Windows drives, NULs and non-strings are ignored", () => {
    expect(dirs("read", { filePath: "/etc/passwd" })).toEqual([]);
    expect(dirs("read", { filePath: "../../outside" })).toEqual([]);
    expect(dirs("read", { filePath: "/repository/lookalike.ts" })).toEqual([]);
    expect(dirs("webfetch", { path: "https://example.com/a" })).toEqual([]);
    expect(dirs("read", { filePath: "C:\\Users\\x" })).toEqual([]);
    expect(dirs("read", { filePath: "a\0b" })).toEqual([]);
    expect(dirs("read", { filePath: 42, path: { nested: "x" }, paths: [1, null] })).toEqual([]);
    for (const args of [null, undefined, "string", 7, ["a"], true]) expect(dirs("read", args)).toEqual([]);
    expect(dirs("read", { filePath: "a".repeat(5000) })).toEqual([]);
  });

  test("a path is taken as OpenCode opens it: `~` and blanks are part of names (found in a hunt)", () => {
    expect(dirs("read", { filePath: "~/secrets" })).toEqual(["/repo/~"]);
    expect(dirs("glob", { path: "end " })).toEqual(["/repo/end "]);
    expect(dirs("bash", { workdir: " lead" })).toEqual(["/repo/ lead"]);
    // apply_patch's headers are trimmed, as OpenCode's parser trims them.
    expect(dirs("apply_patch", { patchText: "*** Begin Patch\n*** Add File:  pkg/x.ts \n+x\n*** End Patch" })).toEqual(["/repo/pkg"]);
  });

  test("a glob's pattern names the directories before its first wildcard, below its path (found in a hunt)", () => {
    expect(dirs("glob", { pattern: "pkg/src/**/*.ts" })).toEqual(["/repo/pkg/src"]);
    expect(dirs("glob", { path: "lib", pattern: "a/{b,c}/*.md" })).toEqual(["/repo/lib", "/repo/lib/a"]);
    expect(dirs("glob", { pattern: "src/index.ts" })).toEqual(["/repo/src"]);
    for (const pattern of ["**/*.ts", "*.md", "!pkg/x", "[ab]/c.ts", "../../etc/*"]) expect(dirs("glob", { pattern })).toEqual([]);
    // Only glob's: grep's `include` filters file names.
    expect(dirs("grep", { pattern: "pkg/x", include: "pkg/*.ts" })).toEqual([]);
  });

  test("the number of paths taken from one call is bounded", () => {
    const paths = Array.from({ length: 500 }, (_, i) => `d${i}`);
    expect(dirs("custom", { paths }).length).toBe(64);
  });

  test("toolPaths tells files from directories", () => {
    expect(toolPaths("write", { filePath: "a/AGENTS.md" }, root, root)).toEqual([{ path: "/repo/a/AGENTS.md", isFile: true }]);
    expect(toolPaths("glob", { path: "a" }, root, root)).toEqual([{ path: "/repo/a", isFile: false }]);
  });
});

describe("throughDotGit", () => {
  test("git's directory as case-folding, HFS+ and NTFS filesystems read its name is refused; look-alike names that are not it are not", () => {
    for (const rel of [".git/config", ".GIT/config", "a/.Git/HEAD", ".g\u200cit/config", "\ufeff.git/config", ".git./config", ".git . /config", ".git::$INDEX_ALLOCATION/config", "GIT~1/config", "sub/git~1/config", ".git"]) {
      expect([rel, throughDotGit(rel)]).toEqual([rel, true]);
    }
    for (const rel of ["git/config", ".gitignore", ".github/AGENTS.md", ".git-blame-ignore-revs", "a.git/x", "git~2/x", ".gi/t", "docs/.gitkeep"]) {
      expect([rel, throughDotGit(rel)]).toEqual([rel, false]);
    }
  });

  test("property: any name that folds to .git, with ignorable code points and NTFS tails anywhere allowed, is caught; inserting them into another name never makes it .git", () => {
    const ignorable = fc.constantFrom("\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\u206a", "\u206f", "\ufeff");
    const dotGit = fc
      .tuple(fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }), fc.array(ignorable, { maxLength: 3 }), fc.nat(4), fc.stringMatching(/^[. ]{0,3}$/))
      .map(([upper, marks, at, tail]) => {
        const name = [...".git"].map((char, i) => (upper[i] ? char.toUpperCase() : char)).join("");
        return `${name.slice(0, at)}${marks.join("")}${name.slice(at)}${tail}`;
      });
    fc.assert(fc.property(fc.array(fc.stringMatching(/^[a-z]{1,6}$/), { maxLength: 3 }), dotGit, fc.array(fc.stringMatching(/^[a-z]{1,6}$/), { maxLength: 3 }), (above, name, below) => throughDotGit([...above, name, ...below].join("/"))));
    fc.assert(fc.property(fc.array(fc.stringMatching(/^[a-z0-9_-]{1,8}$/).filter((name) => name !== "git~1"), { minLength: 1, maxLength: 4 }), ignorable, (names, mark) => !throughDotGit(names.map((name) => `${mark}${name}`).join("/"))));
  });
});
