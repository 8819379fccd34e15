// A minimal SVG writer shared by the pictures (`plan`/`topo --format svg`, `report --format svg`):
// rectangles and text on a fixed-width canvas, XML-escaped. Header-only.
#pragma once

#include <sstream>
#include <string>

namespace dlaunch {

inline std::string xml_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '&')
            out += "&amp;";
        else if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else if (c == '"')
            out += "&quot;";
        else
            out += c;
    }
    return out;
}

// `text` cut to fit `width` pixels at font `size` (sans-serif: about 0.6 x size per character), its start
// replaced by "..." when cut: the end of a path (the file) is what tells it apart.
inline std::string fit_width(const std::string& text, int size, int width) {
    const size_t most = static_cast<size_t>(width * 10 / (6 * size));
    if (text.size() <= most || most < 4) return text;
    return "..." + text.substr(text.size() - (most - 3));
}

class SvgCanvas {
public:
    explicit SvgCanvas(int width) : width_(width) {}
    // `attrs`: further attributes, already escaped (class="..." data-...="...").
    void rect(int x, int y, int w, int h, const std::string& fill, const std::string& attrs = "") {
        body_ << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << h << "\" fill=\""
              << fill << "\" stroke=\"#555\"" << (attrs.empty() ? "" : " " + attrs) << "/>\n";
    }
    void text(int x, int y, const std::string& s, int size = 12) {
        body_ << "<text x=\"" << x << "\" y=\"" << y << "\" font-family=\"sans-serif\" font-size=\"" << size << "\">"
              << xml_escape(s) << "</text>\n";
    }
    std::string done(int height, const std::string& title) const {
        std::ostringstream out;
        out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            << "width=\"" << width_ << "\" height=\"" << height << "\" viewBox=\"0 0 " << width_ << " " << height
            << "\">\n<title>" << xml_escape(title) << "</title>\n"
            << body_.str() << "</svg>\n";
        return out.str();
    }

private:
    int width_;
    std::ostringstream body_;
};

}  // namespace dlaunch
