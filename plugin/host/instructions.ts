/**
 * OpenCode puts each instruction file it loads into its system prompt as exactly
 * `Instructions from: <absolute path>\n<raw file text>` (1.18.33, session/instruction.ts), and
 * appends nested ones to a `read` output in a closing `<system-reminder>` whose entries have the
 * same form, joined by blank lines, with their paths in `metadata.loaded`.
 */
export const HOST_MARKER = "Instructions from: ";
const REMINDER_OPEN = "\n\n<system-reminder>\n";
const REMINDER_CLOSE = "\n</system-reminder>";

/** The paths the host's system prompt names at the start of a line, found by substring search (the prompt is tens of KB, new on every request). */
export function hostEntryPaths(system: string): string[] {
  const paths: string[] = [];
  for (let at = system.indexOf(HOST_MARKER); at !== -1; at = system.indexOf(HOST_MARKER, at + 1)) {
    if (at > 0 && system[at - 1] !== "\n") continue;
    const end = system.indexOf("\n", at);
    if (end === -1) break;
    paths.push(system.slice(at + HOST_MARKER.length, end));
  }
  return paths;
}

/**
 * Whether the host's system prompt carries `raw` as the entry for `path`: a line naming it, then
 * exactly the file's text. A line quoted inside some file does not count unless the whole file follows.
 */
export function hostCarries(system: string, path: string, raw: string): boolean {
  const entry = `${HOST_MARKER}${path}\n${raw}`;
  for (let at = system.indexOf(entry); at !== -1; at = system.indexOf(entry, at + 1)) {
    if (at === 0 || system[at - 1] === "\n") return true;
  }
  return false;
}

/** The entries of the reminder OpenCode appended to a read's output ("" when it has none): what a tool's own text quotes of a marker line is not in it. */
export function reminderOf(output: string): string {
  const start = output.lastIndexOf(REMINDER_OPEN);
  if (start === -1) return "";
  const end = output.indexOf(REMINDER_CLOSE, start);
  return end === -1 ? "" : output.slice(start + REMINDER_OPEN.length, end);
}

/**
 * Whether a read's output holds OpenCode's reminder entry for `path` with exactly `raw`: the marker
 * line, then the file's text, ended where an entry ends (the reminder's close, or the next entry). An
 * older version that begins with the current text is another text.
 */
export function reminderCarries(output: string, path: string, raw: string): boolean {
  const entry = `${HOST_MARKER}${path}\n${raw}`;
  for (let at = output.indexOf(entry); at !== -1; at = output.indexOf(entry, at + 1)) {
    const end = at + entry.length;
    if (output.startsWith(REMINDER_CLOSE, end) || output.startsWith(`\n\n${HOST_MARKER}`, end)) return true;
  }
  return false;
}

/**
 * Removes from a read's output the reminder entries of `drop` (path → the raw text the entry must
 * hold), judged by structure: the reminder OpenCode appended for `loaded` (its `metadata.loaded`,
 * in order) must close the output, and a dropped entry must be exactly that file's text. Anything
 * that does not match that shape is left as it is. A reminder left with no entry goes whole.
 */
export function stripReminder(output: string, loaded: readonly string[], drop: ReadonlyMap<string, string>): string {
  if (loaded.length === 0 || drop.size === 0 || !output.endsWith(REMINDER_CLOSE)) return output;
  const start = output.lastIndexOf(`${REMINDER_OPEN}${HOST_MARKER}${loaded[0]}\n`);
  if (start === -1) return output;
  const closeAt = output.length - REMINDER_CLOSE.length;
  const entries: { path: string; text: string }[] = [];
  let at = start + REMINDER_OPEN.length;
  for (let i = 0; i < loaded.length; i++) {
    const path = loaded[i]!;
    const header = `${HOST_MARKER}${path}\n`;
    if (!output.startsWith(header, at)) return output;
    const raw = drop.get(path);
    let end: number;
    if (raw !== undefined) {
      end = at + header.length + raw.length;
      if (output.slice(at + header.length, end) !== raw) return output;
    } else {
      const next = loaded[i + 1];
      end = next === undefined ? closeAt : output.indexOf(`\n\n${HOST_MARKER}${next}\n`, at + header.length);
      if (end === -1) return output;
    }
    entries.push({ path, text: output.slice(at, end) });
    const last = i === loaded.length - 1;
    if (last ? end !== closeAt : !output.startsWith("\n\n", end)) return output;
    at = end + 2;
  }
  const kept = entries.filter((entry) => !drop.has(entry.path));
  if (kept.length === entries.length) return output;
  const before = output.slice(0, start);
  return kept.length === 0 ? before : `${before}${REMINDER_OPEN}${kept.map((entry) => entry.text).join("\n\n")}${REMINDER_CLOSE}`;
}
