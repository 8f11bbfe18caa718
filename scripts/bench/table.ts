import type { Summary } from "./stats.js";

/** `time` samples are nanoseconds, `memory` samples bytes, `rate` samples per second. */
export type Kind = "time" | "memory" | "rate";

export interface Goal {
  readonly text: string;
  readonly met: boolean;
}

/** One line of the table. A row without `value` was skipped; `note` says why. */
export interface Row {
  readonly name: string;
  readonly kind: Kind;
  readonly value?: Summary;
  readonly ratio?: string;
  readonly goal?: Goal;
  readonly note?: string;
}

export function formatValue(value: number, kind: Kind): string {
  // A per-round difference (what one command adds to another) can come out below zero when the two are noise apart.
  if (value < 0) return `−${formatValue(-value, kind)}`;
  if (kind === "memory") return `${(value / 2 ** 20).toFixed(1)} MiB`;
  if (kind === "rate") return `${value.toFixed(0)}/s`;
  if (value < 1e3) return `${value.toFixed(0)} ns`;
  if (value < 1e6) return `${(value / 1e3).toFixed(2)} µs`;
  if (value < 1e9) return `${(value / 1e6).toFixed(value < 1e7 ? 2 : 1)} ms`;
  return `${(value / 1e9).toFixed(2)} s`;
}

export function ratioText(ratio: number, baseline: string): string {
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(2)}× ${baseline}`;
}

/** A Markdown table, padded so it also reads well in a terminal. */
export function renderTable(rows: readonly Row[]): string {
  const header = ["measurement", "median", "min–max", "runs", "ratio", "goal"];
  const cells = rows.map((row) => {
    const value = row.value;
    return [
      row.name,
      value ? formatValue(value.median, row.kind) : "skipped",
      value ? `${formatValue(value.min, row.kind)} – ${formatValue(value.max, row.kind)}` : (row.note ?? ""),
      value ? String(value.runs) : "",
      row.ratio ?? "",
      row.goal ? `${row.goal.text}: ${row.goal.met ? "met" : "MISSED"}` : "",
    ];
  });
  const widths = header.map((title, column) =>
    Math.max(title.length, ...cells.map((line) => (line[column] ?? "").length)),
  );
  const line = (values: readonly string[]): string =>
    `| ${values.map((text, column) => text.padEnd(widths[column] ?? 0)).join(" | ")} |`;
  return [line(header), line(widths.map((width) => "-".repeat(width))), ...cells.map(line)].join("\n");
}
