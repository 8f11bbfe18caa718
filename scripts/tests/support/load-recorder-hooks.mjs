// Module hooks for load-recorder.mjs.
import { appendFileSync } from "node:fs";

let out;

export function initialize(data) {
  out = data.out;
}

export async function load(url, context, nextLoad) {
  if (url.startsWith("file:") && out) appendFileSync(out, `${url}\n`);
  return nextLoad(url, context);
}
