/**
 * The two loaders the plugin is measured beside, same trees, same process, same steps. Both build one
 * merged text for the chains (touched directory up to the root, at most 10 levels) of every touched
 * directory: first existing of AGENTS.md, CLAUDE.md per directory, frontmatter stripped, root first,
 * capped at 32,000 characters (8,000 tokens x 4; a character cap so they pay for no tokenizer).
 * (a) naive: every step walks up from every touched directory, stats and reads every file again.
 * (b) stat cache: chains computed once at touch time; every step stats every candidate file (a new
 *     file must be seen) and re-reads and re-merges only what changed.
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import type { Call } from "./host.ts";

const FILE_NAMES = ["AGENTS.md", "CLAUDE.md"];
const MAX_DEPTH = 10;
const BUDGET_CHARS = 32_000;

/** The directory a tool call touches (filePath, path, workdir or an apply_patch header). */
export function touchedDir(call: Call): string {
  const { filePath, path, workdir, patchText } = call.args as Record<string, string | undefined>;
  if (filePath) return dirname(filePath);
  if (path ?? workdir) return (path ?? workdir) as string;
  return dirname(/\*\*\* (?:Update|Add|Delete) File: (.+)/.exec(patchText ?? "")?.[1] ?? ".");
}

function walkUp(start: string, root: string): string[] {
  if (start !== root && !start.startsWith(root + sep)) return [];
  const dirs = [start];
  for (let dir = start; dir !== root && dirs.length <= MAX_DEPTH; ) dirs.push((dir = dirname(dir)));
  return dirs;
}

function merge(sections: Array<{ path: string; text: string }>): string {
  sections.sort((a, b) => (a.path < b.path ? -1 : 1));
  let body = "";
  for (const { path, text } of sections) {
    const end = text.startsWith("---\n") ? text.indexOf("\n---\n", 4) : -1;
    body += `## ${path}\n\n${end === -1 ? text : text.slice(end + 5)}\n`;
  }
  return `<project-context>\n${body.slice(0, BUDGET_CHARS)}</project-context>`;
}

export interface Loader {
  touch(dir: string): void;
  render(): string;
}

export class NaiveLoader implements Loader {
  private readonly touched = new Set<string>();
  constructor(private readonly root: string) {}
  touch(dir: string): void {
    this.touched.add(dir);
  }
  render(): string {
    const seen = new Set<string>();
    const sections: Array<{ path: string; text: string }> = [];
    for (const dir of [...this.touched].flatMap((start) => walkUp(start, this.root))) {
      if (seen.has(dir)) continue;
      seen.add(dir);
      const path = FILE_NAMES.map((name) => join(dir, name)).find((p) => statSync(p, { throwIfNoEntry: false })?.isFile());
      if (path) sections.push({ path, text: readFileSync(path, "utf8") });
    }
    return merge(sections);
  }
}

export class StatCacheLoader implements Loader {
  private readonly chainDirs = new Set<string>();
  private readonly files = new Map<string, { mtimeMs: number; size: number; text: string } | null>();
  private merged = "";
  private dirty = true;
  constructor(private readonly root: string) {}
  touch(dir: string): void {
    for (const d of walkUp(dir, this.root)) if (!this.chainDirs.has(d)) (this.chainDirs.add(d), (this.dirty = true));
  }
  render(): string {
    for (const dir of this.chainDirs) {
      for (const path of FILE_NAMES.map((name) => join(dir, name))) {
        const stat = statSync(path, { throwIfNoEntry: false });
        const cached = this.files.get(path);
        if (!stat && cached === null) continue;
        if (stat && cached && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size) continue;
        this.files.set(path, stat ? { mtimeMs: stat.mtimeMs, size: stat.size, text: readFileSync(path, "utf8") } : null);
        this.dirty = true;
      }
    }
    if (this.dirty) {
      const sections = [...this.chainDirs].flatMap((dir) => {
        const path = FILE_NAMES.map((name) => join(dir, name)).find((p) => this.files.get(p));
        return path ? [{ path, text: this.files.get(path)?.text ?? "" }] : [];
      });
      this.merged = merge(sections);
      this.dirty = false;
    }
    return this.merged;
  }
}
