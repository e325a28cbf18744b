// The live job page: one self-contained HTML file (src/metrics/
// job_page.html) that the exporter serves at / and that draws the job from
// api/job once a second. CMake embeds the file in the library when it is
// built (cmake/embed_text.cmake), so the page and the binary never disagree
// and nothing has to be installed beside kolorun.
//
// Thread-safety: the text is a constant; call from any thread.
#ifndef KOLO_METRICS_JOB_PAGE_H_
#define KOLO_METRICS_JOB_PAGE_H_

namespace kolo::metrics {

// The page, UTF-8, NUL-terminated; static storage.
const char* JobPageHtml();

}  // namespace kolo::metrics

#endif  // KOLO_METRICS_JOB_PAGE_H_
