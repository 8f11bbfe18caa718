import type { Settings, SettingSources } from "../config.js";
import { shownText } from "./approval-view.js";
import { oneLine } from "./visible.js";

/**
 * The line a real run starts with: which model, at which host, and where each setting came from, so a `.env`
 * or a variable that sends the key somewhere unexpected is seen before the first request. The key is never shown.
 */
export function settingsLine(settings: Settings, sources: SettingSources): string {
  const host = new URL(settings.baseURL).host;
  return (
    `模型: ${shownText(settings.model, 40)} @ ${shownText(host, 60)} ` +
    `(模型来自 ${oneLine(sources.model)}, 地址来自 ${oneLine(sources.baseURL)}, 密钥来自 ${oneLine(sources.apiKey)})`
  );
}
