import { isAbsolute, resolve, sep } from "node:path";
import { isInside } from "../paths.ts";

/** Argument names that hold a file (or, for `read`, possibly a directory: the store decides by stat). */
const FILE_KEYS = ["filePath", "file_path", "filepath", "file", "files"] as const;
/** Argument names that hold a directory, or a path that may be either. */
const DIRECTORY_KEYS = ["path", "paths", "workdir", "cwd", "directory", "dir"] as const;

/**
 * A patch's header lines, as OpenCode's parser reads them: lines split at "\n" only, a line that
 * starts with one of these, its path the rest of the line trimmed (no space needed after the colon; a
 * name may hold a CR or U+2028, which the `m` flag's `^` and `$`, and `.`, take for line ends).
 */
const PATCH_HEADER = /(?:^|\n)\*\*\* (?:Add File|Update File|Delete File|Move to):([^\n]*)/g;

/** A name of a glob's pattern that is not a literal directory name: a wildcard, a class, braces, an escape or a negation. */
const GLOB_SYNTAX = /[*?[\]{}\\]|^!/;

/** Guards against hostile or malformed arguments: each bounds the work `tool.execute.before` may do. */
const MAX_PATH_LENGTH = 4096;
const MAX_PATHS_PER_CALL = 64;
const MAX_PATCH_LENGTH = 1024 * 1024;
/**
 * Headers of one patch looked at: the path cap counts distinct paths, and 60,000 headers naming one
 * file (under MAX_PATCH_LENGTH) were each resolved, 30-100 ms in each of the two tool hooks.
 */
const MAX_PATCH_HEADERS = 4 * MAX_PATHS_PER_CALL;

/** The name of the plugin's own tool: the path it is given is what to pin or unload, not a touch. */
export const CONTEXT_TOOL = "project_context";

export interface ToolPath {
  /** Absolute, lexically inside the worktree (symlinks are settled later, on real paths). */
  readonly path: string;
  /** Named as a file (filePath, patch headers…) rather than a directory or either. */
  readonly isFile: boolean;
}

/**
 * The paths a tool call names, read from its arguments alone. Pure string work:
 * `tool.execute.before` runs before every tool and must not wait on the filesystem.
 */
export function toolPaths(tool: unknown, args: unknown, sessionDir: string, worktree: string): ToolPath[] {
  if (tool === CONTEXT_TOOL || typeof args !== "object" || args === null || Array.isArray(args)) return [];
  const record = args as Record<string, unknown>;
  const found = new Map<string, boolean>();
  const add = (raw: string, isFile: boolean) => {
    if (found.size >= MAX_PATHS_PER_CALL) return;
    const absolute = toAbsolute(raw, sessionDir);
    if (absolute !== undefined && isInside(absolute, worktree) && !found.has(absolute)) found.set(absolute, isFile);
  };
  for (const key of FILE_KEYS) for (const value of strings(record[key])) add(value, true);
  for (const key of DIRECTORY_KEYS) for (const value of strings(record[key])) add(value, false);
  if (tool === "glob" && typeof record.pattern === "string" && record.pattern.length <= MAX_PATH_LENGTH) {
    // OpenCode's glob lists what `pattern` matches below `path` (the session directory when absent):
    // `pkg/src/**/*.ts` reaches pkg/src as `path: "pkg/src"` would. The directories named before the
    // first wildcard count (the last name is the files').
    const base = typeof record.path === "string" && record.path !== "" ? toAbsolute(record.path, sessionDir) : sessionDir;
    const names = record.pattern.split("/");
    const literal = names.slice(0, -1).findIndex((name) => GLOB_SYNTAX.test(name));
    const prefix = names.slice(0, literal === -1 ? -1 : literal).join("/");
    if (base !== undefined && prefix !== "") add(resolve(base, prefix), false);
  }
  if (tool === "apply_patch" || tool === "patch" || typeof record.patchText === "string") {
    const patch = record.patchText;
    if (typeof patch === "string" && patch.length <= MAX_PATCH_LENGTH) {
      let headers = 0;
      for (const match of patch.matchAll(PATCH_HEADER)) {
        add((match[1] ?? "").trim(), true);
        if (++headers === MAX_PATCH_HEADERS) break;
      }
    }
  }
  return [...found].map(([path, isFile]) => ({ path, isFile }));
}

function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.filter((item): item is string => typeof item === "string").slice(0, MAX_PATHS_PER_CALL);
  return [];
}

/**
 * The path OpenCode opens for `value` (its tools resolve it against the session directory as given:
 * no trimming, no `~` expansion, so `end ` and `~home` are names of the worktree); `undefined` for
 * URLs, NULs and Windows drives, which name no local file a tool reached.
 */
function toAbsolute(value: string, base: string): string | undefined {
  if (value.length === 0 || value.length > MAX_PATH_LENGTH || value.includes("\0")) return undefined;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return undefined;
  if (sep === "/" && /^[a-z]:[\\/]/i.test(value)) return undefined;
  return isAbsolute(value) ? resolve(value) : resolve(base, value);
}
