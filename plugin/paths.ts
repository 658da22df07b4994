import { realpathSync, statSync } from "node:fs";
import { relative, sep } from "node:path";

/** `path` with every symlink resolved, or as given when it does not resolve. */
export function realPathOr(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}

/** Lexical containment: `path` is `root` or below it. Symlinks are settled on real paths, at read time. */
export function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** `path` relative to `root` with "/" between names, as git, globs and `paths:` write them. */
export function relativePosix(root: string, path: string): string {
  return relative(root, path).split(sep).join("/");
}

/** What stat says of a path (identity, size, times), to tell a change; "-" when it is not there. */
export function statPrint(path: string): string {
  try {
    const info = statSync(path, { throwIfNoEntry: false });
    return info === undefined ? "-" : `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
  } catch {
    return "-";
  }
}
