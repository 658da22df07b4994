/**
 * The two loaders the plugin is compared against, on the same trees in the same process.
 *
 * Both produce the same shape as the plugin: one merged `<project-context>` text for the union of
 * the directory chains (touched directory up to the root) of every touched directory, root first,
 * first existing file of `fileNames` per directory (OpenCode's own precedence), frontmatter
 * stripped, capped at `budgetChars` (≈ systemTokens × 4, a character cap rather than a tokenizer
 * pass so the baselines are not charged for tokenizing). The cap is applied after merging because
 * neither baseline can know what fits without reading the files first.
 *
 * (a) NaiveLoader: what the single-root loaders and OpenCode itself do: every message walks up from
 *     every touched directory, checks which files exist, re-reads and re-merges them from disk.
 * (b) StatCachedLoader: the obvious cache: chains are computed once at touch time; every message
 *     does one stat per candidate file (present or not, since a newly created file must be seen),
 *     re-reads only files whose mtime/size changed, and re-merges only when something changed.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";

export interface ContextLoader {
  readonly name: string;
  /** A tool touched this file (or directory). */
  touch(absPath: string): void;
  /** The block that would be injected for the next request ("" when there is nothing). */
  render(): string;
}

export interface LoaderOptions {
  root: string;
  fileNames: readonly string[];
  /** Levels a walk may climb above the touched directory (the plugin's `maxDepth`, default 10). */
  maxDepth: number;
  budgetChars: number;
}

/** The touched directory and up to `maxDepth` parents, never above `root`, closest first. */
function walkUp(start: string, root: string, maxDepth: number): string[] {
  if (!isInside(root, start)) return [];
  const dirs = [start];
  for (let dir = start; dir !== root && dirs.length <= maxDepth; ) {
    dir = dirname(dir);
    dirs.push(dir);
  }
  return dirs;
}

function stripFrontmatter(text: string): string {
  if (!text.startsWith("---\n")) return text;
  const end = text.indexOf("\n---", 4);
  if (end === -1) return text;
  const afterFence = text.indexOf("\n", end + 4);
  return afterFence === -1 ? "" : text.slice(afterFence + 1);
}

function isInside(root: string, dir: string): boolean {
  return dir === root || dir.startsWith(root + sep);
}

/** Directory of a touched path; the bench touches files, so dirname is enough. */
function touchedDirOf(absPath: string): string {
  return dirname(absPath);
}

/** Root first so shared ancestors come before the directories that refine them. */
function mergeSections(root: string, sections: ReadonlyArray<{ path: string; text: string }>, budgetChars: number): string {
  if (sections.length === 0) return "";
  const ordered = sections.slice().sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  let body = "";
  for (const section of ordered) {
    body += `## ${relative(root, section.path) || "AGENTS.md"}\n\n${stripFrontmatter(section.text)}\n`;
  }
  if (body.length > budgetChars) body = body.slice(0, budgetChars);
  return `<project-context>\n${body}</project-context>`;
}

export class NaiveLoader implements ContextLoader {
  readonly name = "naive";
  private readonly touchedDirs = new Set<string>();

  constructor(private readonly options: LoaderOptions) {}

  touch(absPath: string): void {
    this.touchedDirs.add(touchedDirOf(absPath));
  }

  render(): string {
    const { root, fileNames, maxDepth, budgetChars } = this.options;
    const visited = new Set<string>();
    const sections: Array<{ path: string; text: string }> = [];
    for (const start of this.touchedDirs) {
      for (const dir of walkUp(start, root, maxDepth)) {
        // Chains share ancestors; reading a shared file once per message is the least a loader does.
        if (visited.has(dir)) continue;
        visited.add(dir);
        for (const fileName of fileNames) {
          const path = join(dir, fileName);
          if (existsSync(path)) {
            sections.push({ path, text: readFileSync(path, "utf8") });
            break;
          }
        }
      }
    }
    return mergeSections(root, sections, budgetChars);
  }
}

interface CachedFile {
  mtimeMs: number;
  size: number;
  text: string;
}

export class StatCachedLoader implements ContextLoader {
  readonly name = "stat-cache";
  private readonly chainDirs = new Set<string>();
  /** Candidate paths per chain directory, in precedence order; computed once. */
  private candidates: string[] = [];
  private readonly files = new Map<string, CachedFile | null>();
  private merged = "";
  private dirty = true;

  constructor(private readonly options: LoaderOptions) {}

  touch(absPath: string): void {
    const { root, fileNames, maxDepth } = this.options;
    for (const dir of walkUp(touchedDirOf(absPath), root, maxDepth)) {
      if (this.chainDirs.has(dir)) continue;
      this.chainDirs.add(dir);
      for (const fileName of fileNames) this.candidates.push(join(dir, fileName));
      this.dirty = true;
    }
  }

  render(): string {
    let changed = this.dirty;
    for (const path of this.candidates) {
      const stat = statSync(path, { throwIfNoEntry: false });
      const cached = this.files.get(path);
      if (!stat) {
        if (cached !== null) {
          this.files.set(path, null);
          changed = true;
        }
        continue;
      }
      if (cached && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size) continue;
      this.files.set(path, { mtimeMs: stat.mtimeMs, size: stat.size, text: readFileSync(path, "utf8") });
      changed = true;
    }
    if (changed) {
      const { root, fileNames, budgetChars } = this.options;
      const sections: Array<{ path: string; text: string }> = [];
      for (const dir of this.chainDirs) {
        for (const fileName of fileNames) {
          const path = join(dir, fileName);
          const file = this.files.get(path);
          if (file) {
            sections.push({ path, text: file.text });
            break;
          }
        }
      }
      this.merged = mergeSections(root, sections, budgetChars);
      this.dirty = false;
    }
    return this.merged;
  }
}
