// The measured gate times (docs/gate-timing.json, written by `npm run measure:gate`) and the text made from
// them: the table in docs/snapshots.md and the sentence in README.md that says how long `npm test` takes.
// verify:guides checks both against the JSON, so neither can state a time that was not measured.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface SideTiming {
  readonly revision: string;
  readonly steps: readonly { readonly step: string; readonly seconds: number }[];
  readonly total: number;
}

export interface GateTiming {
  readonly machine: string;
  readonly baseline: SideTiming;
  readonly current: SideTiming;
}

export const TABLE_START = "<!-- gate-timing: made by npm run measure:gate from docs/gate-timing.json -->";
export const TABLE_END = "<!-- /gate-timing -->";

const seconds = (value: number): string => `${value.toFixed(1)} s`;
const percent = (part: number, whole: number): string => `${Math.round((part / whole) * 100)} %`;
const stepTime = (side: SideTiming, step: string): number =>
  side.steps.filter((time) => time.step === step).reduce((sum, time) => sum + time.seconds, 0);

/** The table for docs/snapshots.md, markers included. */
export function renderTiming(timing: GateTiming): string {
  const { baseline, current } = timing;
  const rows = [
    `| 步骤 | 之前（\`${baseline.revision.slice(0, 7)}\`） | 现在（\`${current.revision.slice(0, 7)}\`） |`,
    "| --- | --- | --- |",
  ];
  const names = [...new Set([...baseline.steps, ...current.steps].map((time) => time.step))];
  for (const name of names) {
    const [before, after] = [stepTime(baseline, name), stepTime(current, name)];
    rows.push(`| \`${name}\` | ${before === 0 ? "—" : seconds(before)} | ${after === 0 ? "—" : seconds(after)} |`);
  }
  const test = "npm test";
  rows.push(
    `| \`${test}\` 占之前的 | | ${percent(stepTime(current, test), stepTime(baseline, test))} |`,
    `| 合计 | ${seconds(baseline.total)} | ${seconds(current.total)}（之前的 ${percent(current.total, baseline.total)}） |`,
  );
  const table = ["<!-- prettier-ignore-start -->", ...rows, "<!-- prettier-ignore-end -->"];
  return [TABLE_START, "", `机器：${timing.machine}。`, "", ...table, "", TABLE_END].join("\n");
}

/** The sentence README.md must hold: how long `npm test` took in the measurement. */
export function readmeSentence(timing: GateTiming): string {
  return `实测 ${stepTime(timing.current, "npm test").toFixed(1)} 秒`;
}

/** Where docs/snapshots.md or README.md disagree with docs/gate-timing.json; empty when they agree. */
export function timingProblems(repo: string): string[] {
  const file = join(repo, "docs", "gate-timing.json");
  if (!existsSync(file)) return ["docs/gate-timing.json is missing: run npm run measure:gate"];
  const timing = JSON.parse(readFileSync(file, "utf8")) as GateTiming;
  const problems: string[] = [];
  const snapshots = readFileSync(join(repo, "docs", "snapshots.md"), "utf8");
  const start = snapshots.indexOf(TABLE_START);
  const end = snapshots.indexOf(TABLE_END);
  if (start < 0 || end < start) problems.push("docs/snapshots.md: no gate-timing table");
  else if (snapshots.slice(start, end + TABLE_END.length) !== renderTiming(timing)) {
    problems.push("docs/snapshots.md: the gate-timing table differs from docs/gate-timing.json");
  }
  const readme = readFileSync(join(repo, "README.md"), "utf8");
  if (!readme.includes(readmeSentence(timing))) {
    problems.push(`README.md: does not say how long npm test took as measured (${readmeSentence(timing)})`);
  }
  return problems;
}

/** Writes `timing` into the table of docs/snapshots.md and the sentence of README.md. */
export function applyTiming(repo: string, timing: GateTiming): void {
  const snapshotsFile = join(repo, "docs", "snapshots.md");
  const snapshots = readFileSync(snapshotsFile, "utf8");
  const start = snapshots.indexOf(TABLE_START);
  const end = snapshots.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error("docs/snapshots.md has no gate-timing table to replace");
  writeFileSync(
    snapshotsFile,
    snapshots.slice(0, start) + renderTiming(timing) + snapshots.slice(end + TABLE_END.length),
  );
  const readmeFile = join(repo, "README.md");
  const readme = readFileSync(readmeFile, "utf8");
  if (!/实测 [\d.]+ 秒/.test(readme)) throw new Error("README.md has no 实测 … 秒 sentence to replace");
  writeFileSync(readmeFile, readme.replace(/实测 [\d.]+ 秒/, readmeSentence(timing)));
}
