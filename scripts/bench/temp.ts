import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const live = new Set<string>();

/** A fresh folder under the OS temp dir, as a real path; removed by `removeTemp` or, at the latest, on exit. */
export function makeTemp(label: string): string {
  const folder = realpathSync(mkdtempSync(join(tmpdir(), `agent-bench-${label}-`)));
  live.add(folder);
  return folder;
}

export function removeTemp(folder: string): void {
  rmSync(folder, { recursive: true, force: true });
  live.delete(folder);
}

export function removeAllTemp(): void {
  for (const folder of live) removeTemp(folder);
}

process.once("exit", removeAllTemp);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    removeAllTemp();
    process.exit(130);
  });
}
