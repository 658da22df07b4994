/**
 * Whether `text` ends inside an open ``` or ~~~ fence: written apart from doc.ts, line by line. An
 * opener may be indented any amount (inside a list item); a closer at most 3 columns past the
 * container's content, so no deeper than max(3, the opener's indentation).
 */
export function endsInFence(text: string): boolean {
  let fence: { run: string; indent: number } | undefined;
  const columns = (blanks: string) => [...blanks].reduce((column, blank) => (blank === "\t" ? column + 4 - (column % 4) : column + 1), 0);
  // CRLF ends a line as LF does (CommonMark): `.` below would not match the CR, and "````\r" closes.
  for (const line of text.split(/\r?\n/)) {
    const run = /^([ \t]*)(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence === undefined && run && !(run[2]![0] === "`" && run[3]!.includes("`"))) fence = { run: run[2]!, indent: columns(run[1]!) };
    else if (fence !== undefined && run && run[2]![0] === fence.run[0] && run[2]!.length >= fence.run.length && columns(run[1]!) <= Math.max(3, fence.indent) && run[3]!.trim() === "") fence = undefined;
  }
  return fence !== undefined;
}
