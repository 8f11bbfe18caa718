// Module hooks for child-trace.mjs: every snapshot module a started process loads is written down as it loads.
import { appendFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isSnapshotPath } from "./fs-recorder.mjs";

let out;

export function initialize(data) {
  out = data.out;
}

export async function load(url, context, nextLoad) {
  if (url.startsWith("file:")) {
    const path = fileURLToPath(url);
    if (isSnapshotPath(path)) appendFileSync(out, `${path}\n`);
  }
  return nextLoad(url, context);
}
