import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, openSync, renameSync, statSync, unlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseFrontmatter } from "./frontmatter.ts";
import { outline, sealed, sectionName, sectionsOf } from "../rules/merge.ts";
import { isInside } from "../paths.ts";
import { openedPath, readContained, readContainedHead } from "./contained.ts";
import { writeWhole } from "./write.ts";

/** A section's new text spliced into a context file's text, or why it cannot be. */
export type Splice = { readonly text: string; readonly replaced: boolean } | { readonly error: string };

const MAX_SECTION_TITLE = 200;
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * `raw` with the section titled `title` (level 2 or deeper, matched as merging matches names; the first)
 * given the body `content`; a section that is not there is added at the end as a `##` section. The
 * frontmatter is never touched, and `content` may not open a section of the same or a higher level
 * (it would end the section it is meant to fill, and change the file's structure unseen).
 */
export function spliceSection(raw: string, title: string, content: string): Splice {
  const spliced = splice(raw, title, content);
  // Whatever the content, the frontmatter stays what it was (and none appears where there was none).
  if ("text" in spliced && frontmatterBlock(spliced.text) !== frontmatterBlock(raw)) {
    return { error: "the result would change the file's frontmatter, which this tool never edits" };
  }
  return spliced;
}

/**
 * The frontmatter block `text` opens with, as written ("" when none): the same block gives the same
 * frontmatter. Compared as text, not as what it parses to: YAML aliases can make a 1 KB block a value
 * whose JSON is exponentially large (a tool call once held the event loop 20 s to an out-of-memory error).
 */
const frontmatterBlock = (text: string): string => text.slice(0, text.length - parseFrontmatter(text).body.length);

function splice(raw: string, title: string, content: string): Splice {
  const wanted = title.trim();
  if (wanted === "" || wanted.length > MAX_SECTION_TITLE || /[\r\n]/.test(wanted)) return { error: `section must be one line of 1-${MAX_SECTION_TITLE} characters (a heading's text, without the #s)` };
  const head = frontmatterBlock(raw);
  const body = raw.slice(head.length);
  const found = sectionsOf(body).byName.get(sectionName(`# ${wanted}`));
  const level = found?.level ?? 2;
  const shape = outline(content);
  const opening = shape.lines.find((line) => line.level > 0 && line.level <= level);
  if (opening !== undefined) return { error: `content opens the section "${content.slice(opening.start, opening.end).trim()}" of the same or a higher level; update one section at a time` };
  if (shape.openFence !== undefined) return { error: "content leaves a code fence open (it would swallow the sections after it); close it" };
  const text = content === "" || content.endsWith("\n") ? content : `${content}\n`;
  if (found === undefined) {
    // A file that ends inside a code fence would swallow the new heading (no section, found by no later
    // update): the fence is closed first, where it ran to anyway (a fence left open ends with the file).
    const ended = sealed(body, outline(body).openFence);
    const separator = ended === "" || ended.endsWith("\n\n") ? "" : "\n";
    return { text: `${head}${ended}${separator}## ${wanted}\n${text}`, replaced: false };
  }
  const lineEnd = body.indexOf("\n", found.start);
  const bodyStart = lineEnd === -1 ? body.length : lineEnd + 1;
  // A heading that is the file's last line, with no line break: the body goes on a line of its own, not onto the heading.
  const headingEnd = lineEnd === -1 ? "\n" : "";
  // Keep a blank line before the next heading when the old section had one.
  const gap = /\n\s*\n$/.test(body.slice(bodyStart, found.end)) && found.end < body.length && !text.endsWith("\n\n") ? "\n" : "";
  return { text: `${head}${body.slice(0, bodyStart)}${headingEnd}${text}${gap}${body.slice(found.end)}`, replaced: true };
}

/**
 * Replaces `path` (a real path inside `realRoot`, read contained) by `text`, atomically: a new file
 * in the same directory, synced, then renamed over it, so a reader sees the old text or the new one.
 * Refused when the file changed since `expectedSha256` was read (someone else's edit is never lost).
 */
export function replaceFile(path: string, realRoot: string, maxFileBytes: number, expectedSha256: string, text: string): string | undefined {
  const dir = dirname(path);
  const current = readContained(path, dir, realRoot, maxFileBytes, { transient: true });
  if (current.kind !== "file") return `${basename(path)} cannot be read any more`;
  if (current.version.sha256 !== expectedSha256) return `${basename(path)} changed while it was being updated; try again`;
  if (current.version.truncated) return `${basename(path)} is larger than maxFileBytes: not updated, to keep what lies past the limit`;
  // The decoded text has no byte order mark (the decoder drops it): one the file starts with is written back.
  const head = readContainedHead(path, realRoot, UTF8_BOM.length);
  const bom = head.kind === "head" && Buffer.from(head.bytes).equals(UTF8_BOM) ? UTF8_BOM : Buffer.alloc(0);
  const mode = statSync(path).mode & 0o7777;
  const temporary = join(dir, `.${basename(path)}.${Buffer.from(crypto.getRandomValues(new Uint8Array(6))).toString("hex")}.tmp`);
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  // Closed once only: a descriptor number closed twice may by then be another file's (opened on another thread).
  let open = true;
  try {
    // A directory swapped for a symlink since the read: the file made must still be inside the worktree
    // (on every platform; a swap between this check and the rename below remains possible).
    const made = openedPath(fd, temporary, fstatSync(fd));
    if (made === undefined || !isInside(made, realRoot)) throw new Error("the directory moved outside the worktree");
    writeWhole(fd, Buffer.concat([bom, Buffer.from(text, "utf8")]));
    fchmodSync(fd, mode);
    fsyncSync(fd);
    open = false;
    closeSync(fd);
    renameSync(temporary, path);
  } catch (error) {
    try {
      if (open) closeSync(fd);
    } catch {
      // the error to report is the one that stopped the update
    }
    try {
      unlinkSync(temporary);
    } catch {
      // renamed or never made
    }
    throw error;
  }
  return undefined;
}
