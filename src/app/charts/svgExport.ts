/** Saves a live SVG chart as a standalone file (fonts and colours resolved, no page CSS needed). */
import { download } from '../files/download';

export function svgText(svg: SVGSVGElement): string {
  const copy = svg.cloneNode(true) as SVGSVGElement;
  const [, , w, h] = (svg.getAttribute('viewBox') ?? '0 0 300 150').split(' ').map(Number);
  copy.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  copy.setAttribute('width', String(w * 2));
  copy.setAttribute('height', String(h * 2));
  // currentColor resolves against this; a white backing keeps dark-mode text readable elsewhere.
  copy.setAttribute('style', 'color:#1d2430;background:#ffffff;font-family:system-ui,sans-serif');
  return `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}\n`;
}

export function exportSvg(svg: SVGSVGElement, name: string): void {
  download(name, svgText(svg), 'image/svg+xml');
}
